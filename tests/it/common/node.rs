//! What the node tests share: the host profile's repositories (Debian bookworm from the build
//! host's mirror, with `contrib`, `non-free` and `non-free-firmware`, and `bookworm-security`
//! through `url: host`), and a node resolved against them with its build root installed.

use std::path::PathBuf;

use super::Sandbox;

pub const REPOS: &str = "base:
  apt:
    mirror: host
    suite: bookworm
    components: [main, contrib, non-free, non-free-firmware]
    repositories:
      - {url: host, suite: bookworm-security, components: [main, contrib, non-free, non-free-firmware]}
";

/// The node a host profile named `name` with `host` (the `host:` section's lines) resolves to,
/// and its build root installed at `<sandbox>/root`.
pub fn resolved_build_root(
    sb: &Sandbox,
    name: &str,
    host: &str,
) -> (gpuimg_build::resolve::node::NodeResolution, PathBuf) {
    let p = sb.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!("kind: host\nname: node/{name}\n{REPOS}host:\n{host}"),
    )
    .unwrap();
    let profile = gpuimg_build::profile::load(&p, &|_| None).unwrap();
    let catalog = gpuimg_build::catalog::Catalog::embedded().unwrap();
    let cache = sb.join("cache");
    let trust = gpuimg_fetch::Trust::default();
    let mut quiet = gpuimg_fetch::observe::Silent;
    let node =
        gpuimg_build::ops::node::resolve(&profile, &catalog, &cache, false, &trust, &mut quiet)
            .unwrap()
            .unwrap();
    let root = sb.join("root");
    std::fs::create_dir(&root).unwrap();
    gpuimg_build::ops::node_root::install(
        &profile, &node, &root, &cache, false, &trust, &mut quiet,
    )
    .unwrap();
    (node, root)
}
