//! Checks that span keys or touch the file system: one base, existing sources, sane paths.
//!
//! Turns a `RawProfile` into a `Profile`. Every failure points at the key's line and column.

use std::path::{Component, Path, PathBuf};

use super::node::Node;
use super::schema::{AptSpec, KernelModule, ProfileKind, ProviderKind, RawProfile};
use super::sources::{build_context, join, parse_mode, source};
use super::{Located, Profile, ProfileError};
use gpuimg_oci::image::Platform;
use gpuimg_oci::reference::RepoName;

/// Where the image's base layer comes from.
#[derive(Debug, Clone)]
pub enum Base {
    /// No base: the image holds only `files` (and the self-test).
    None,
    /// A root filesystem tarball (optionally compressed) or directory.
    Rootfs {
        path: PathBuf,
        allow_special_files: bool,
    },
    /// Packages from apt repositories.
    Apt(Box<AptSpec>),
}

/// One `files:` entry: `src` canonical (symlinks resolved, inside the build context, a
/// regular file or a directory), `dst` normalised (no leading `/`).
#[derive(Debug, Clone)]
pub struct FileEntry {
    pub src: PathBuf,
    pub dst: String,
    pub mode: Option<u32>,
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err<T>(&self, at: &Located<T>, key: &str, message: impl Into<String>) -> ProfileError {
        ProfileError::invalid(self.file, at, key, message)
    }
}

pub(super) fn validate(
    raw: RawProfile,
    root: &Node,
    file: &str,
    dir: &Path,
    text: String,
) -> Result<Profile, ProfileError> {
    let cx = Ctx { file };

    let name = RepoName::parse(&raw.name.value).map_err(|e| {
        cx.err(
            &raw.name,
            "name",
            format!(
                "`{}` is not a valid image name: {e}",
                raw.name.value.escape_debug()
            ),
        )
    })?;

    let platform_at = |p: &Located<String>, key: &str| {
        Platform::parse(&p.value).ok_or_else(|| {
            cx.err(
                p,
                key,
                format!(
                    "`{}` is not a platform; expected `os/arch[/variant]`, e.g. `linux/amd64`",
                    p.value
                ),
            )
        })
    };
    let platforms = match (&raw.platform, &raw.platforms) {
        (Some(_), Some(list)) => {
            return Err(cx.err(
                list,
                "platforms",
                "give `platform:` (one) or `platforms:` (several), not both",
            ))
        }
        (None, None) => vec![Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        }],
        (Some(p), None) => vec![platform_at(p, "platform")?],
        (None, Some(list)) => {
            let mut all: Vec<Platform> = Vec::new();
            for name in &list.value {
                let at = Located {
                    value: name.clone(),
                    line: list.line,
                    column: list.column,
                };
                let p = platform_at(&at, "platforms")?;
                if all.contains(&p) {
                    return Err(cx.err(list, "platforms", format!("`{p}` is listed twice")));
                }
                all.push(p);
            }
            if all.is_empty() {
                return Err(cx.err(
                    list,
                    "platforms",
                    "the list is empty; name at least one platform, e.g. `[linux/amd64, linux/arm64]`",
                ));
            }
            all
        }
    };
    let platform = platforms[0].clone();
    let kind = raw
        .kind
        .as_ref()
        .map_or(ProfileKind::Container, |k| k.value);
    if let Some(k) = raw.kind.as_ref().filter(|k| k.value == ProfileKind::Host) {
        if platforms.len() != 1 || platform.architecture != "amd64" {
            return Err(cx.err(
                k,
                "kind",
                format!(
                    "a host profile builds an amd64 node only for now (this one is for {}); use `platform: linux/amd64`",
                    platforms.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let container_only = [
            ("python", raw.python.is_some()),
            ("stack", !stack_is_empty(&raw.stack)),
            ("files", !raw.files.is_empty()),
        ];
        if let Some((key, _)) = container_only.iter().find(|(_, set)| *set) {
            return Err(cx.err(
                k,
                "kind",
                format!("`{key}:` belongs to a container profile; a host profile installs a kernel and the NVIDIA driver (`host:`) from `base.apt`"),
            ));
        }
        if !matches!(raw.base.as_ref().map(|b| &b.value), Some(b) if b.apt.is_some()) {
            return Err(cx.err(
                k,
                "kind",
                "a host profile installs from apt repositories: give `base: {apt: {suite: …, components: [main, contrib, non-free, non-free-firmware]}}`",
            ));
        }
    }

    if let Some(from) = &raw.host.from {
        if kind == ProfileKind::Host {
            return Err(cx.err(
                from,
                "host.from",
                "a host profile is the node itself; `host.from` belongs to a container profile",
            ));
        }
        let h = &raw.host;
        let also = [
            ("gpus", !h.gpus.is_empty()),
            ("driver", h.driver.is_some()),
            ("kernel", h.kernel.is_some()),
            ("kernel_module", h.kernel_module != KernelModule::Any),
            ("system", h.system.is_some()),
        ];
        if let Some((key, _)) = also.iter().find(|(_, set)| *set) {
            return Err(cx.err(
                from,
                "host.from",
                format!("takes every host fact from the node; remove `host.{key}` (the node's own is used)"),
            ));
        }
        if !join(dir, &from.value).is_file() {
            return Err(cx.err(
                from,
                "host.from",
                format!("`{}` is not a file", join(dir, &from.value).display()),
            ));
        }
    }
    if let Some(signing) = &raw.host.signing {
        if kind != ProfileKind::Host {
            return Err(cx.err(
                signing,
                "host.signing",
                "signs the modules a node builds; only a `kind: host` profile builds them",
            ));
        }
        for (at, key) in [
            (&signing.value.key, "host.signing.key"),
            (&signing.value.certificate, "host.signing.certificate"),
        ] {
            if !join(dir, &at.value).is_file() {
                return Err(cx.err(
                    at,
                    key,
                    format!("`{}` is not a file", join(dir, &at.value).display()),
                ));
            }
        }
    }

    let base = match &raw.base {
        None => Base::None,
        Some(b) => match (&b.value.rootfs, &b.value.apt) {
            (Some(r), None) => {
                let path = join(dir, &r.value);
                if !path.exists() {
                    return Err(cx.err(
                        r,
                        "base.rootfs",
                        format!("`{}` does not exist", path.display()),
                    ));
                }
                Base::Rootfs {
                    path,
                    allow_special_files: b.value.allow_special_files,
                }
            }
            (None, Some(apt)) => Base::Apt(Box::new(apt.clone())),
            _ => {
                return Err(cx.err(b, "base", "must hold exactly one of `rootfs` or `apt`"));
            }
        },
    };

    let mut files = Vec::new();
    let context = match (&raw.context, raw.files.is_empty()) {
        (None, true) => None,
        (c, _) => Some(build_context(c.as_ref(), dir, file)?),
    };
    for f in &raw.files {
        let spec = &f.value;
        let src = source(&spec.src, dir, context.as_deref().unwrap_or(dir), file)?;
        if spec.dst.contains(char::is_control) {
            return Err(cx.err(
                &spec.dst,
                "files.dst",
                format!("`{}` holds a control character", spec.dst.value),
            ));
        }
        let dst = normalise_dst(&spec.dst).ok_or_else(|| {
            cx.err(
                &spec.dst,
                "files.dst",
                format!(
                    "`{}` must be an absolute path inside the image without `..`",
                    spec.dst.value
                ),
            )
        })?;
        let mode = match &spec.mode {
            None => None,
            Some(m) => Some(parse_mode(&m.value).ok_or_else(|| {
                cx.err(
                    m,
                    "files.mode",
                    format!(
                        "`{}` is not a mode: write 3 or 4 octal digits, like \"0755\"",
                        m.value
                    ),
                )
            })?),
        };
        files.push(FileEntry { src, dst, mode });
    }

    for key in raw.config.env.keys() {
        if key.is_empty() || key.contains('=') {
            let at = root.key_pos(&["config", "env", key]).unwrap_or(root.pos);
            let at = Located {
                value: (),
                line: at.line,
                column: at.column,
            };
            return Err(cx.err(
                &at,
                "config.env",
                format!("`{key}` is not a valid environment variable name"),
            ));
        }
    }

    let layers = super::layers::validate(
        &raw.layers,
        file,
        matches!(base, Base::Apt(_)),
        raw.python.is_some(),
    )?;
    let stack = &raw.stack;
    for (name, at, pin) in [
        ("cuda", &raw.providers.cuda, &stack.cuda),
        ("cudnn", &raw.providers.cudnn, &stack.cudnn),
        ("nccl", &raw.providers.nccl, &stack.nccl),
    ] {
        let Some(at) = at else {
            continue;
        };
        if pin.is_none() {
            return Err(cx.err(
                at,
                "providers",
                format!("`providers.{name}` says where `stack.{name}` comes from, and the profile pins no `stack.{name}`"),
            ));
        }
        if at.value == ProviderKind::Apt && !matches!(base, Base::Apt(_)) {
            return Err(cx.err(
                at,
                "providers",
                "`apt` takes the libraries from the base's apt repositories, and this profile has no `base.apt`",
            ));
        }
    }
    let python = match &raw.python {
        Some(p) => Some(super::python_section::validate(
            p,
            raw.context.as_ref(),
            file,
            dir,
        )?),
        None => None,
    };

    Ok(Profile {
        file: file.to_string(),
        dir: dir.to_path_buf(),
        text,
        kind,
        name,
        platform,
        platforms,
        base,
        host: raw.host,
        stack: raw.stack,
        compat: raw.compat,
        files,
        strip: raw.strip,
        selftest: raw.selftest,
        config: raw.config,
        layers,
        python,
        libraries: raw.libraries,
        providers: raw.providers,
    })
}

/// `/opt/app/` → `opt/app`; refuses relative paths and `..`.
pub(crate) fn normalise_dst(dst: &str) -> Option<String> {
    if !dst.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for c in Path::new(dst).components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => parts.push(p.to_str()?.to_string()),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

fn stack_is_empty(s: &super::StackSpec) -> bool {
    [
        &s.cuda,
        &s.cudnn,
        &s.nccl,
        &s.python,
        &s.pytorch,
        &s.tensorflow,
        &s.jax,
    ]
    .iter()
    .all(|v| v.is_none())
}
