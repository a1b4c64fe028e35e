//! Who owns each path of an image, read from the image itself: one [`OwnerReader`] per kind
//! of ownership record (dpkg's `var/lib/dpkg/info/*.list`, a wheel's `*.dist-info/RECORD`),
//! plus gpuimg's own layers, whose component owns their paths.
//!
//! Readers see only the records' bytes and a view of the merged image; they never read files
//! or layers themselves, so the caller alone decides what is read and how much.

use std::collections::{BTreeMap, BTreeSet};

use super::files::{FileEntry, FileKind};

/// Components gpuimg writes itself: each owns every path in its layer.
const OWN_COMPONENTS: &[&str] = &["files", "selftest", "expect"];

/// The owner of every path in a layer of `component`, when gpuimg wrote that layer itself.
pub fn component_owner(component: &str) -> Option<&str> {
    OWN_COMPONENTS.iter().copied().find(|c| *c == component)
}

/// Symlinks followed while resolving one listed path, as Linux's `MAXSYMLINKS`.
const MAX_HOPS: usize = 40;

/// The merged file tree of an image (paths relative, no leading `/`), for resolving the paths
/// that ownership records name through the image's own symlinks.
pub struct ImageView<'a> {
    entries: &'a BTreeMap<String, FileEntry>,
}

impl<'a> ImageView<'a> {
    pub fn new(entries: &'a BTreeMap<String, FileEntry>) -> Self {
        ImageView { entries }
    }

    /// Where the image keeps `listed` (`/bin/ls` → `usr/bin/ls` when `bin -> usr/bin`): every
    /// component but the last is followed through symlinks, as the kernel would inside the
    /// image. `None` for the root itself or a symlink loop.
    pub fn resolve(&self, listed: &str) -> Option<String> {
        let mut rest: Vec<String> = listed.rsplit('/').map(str::to_string).collect();
        let mut cur: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(c) = rest.pop() {
            match c.as_str() {
                "" | "." => continue,
                ".." => {
                    cur.pop();
                    continue;
                }
                _ => cur.push(c),
            }
            if rest.iter().all(|r| r.is_empty() || r == ".") {
                break;
            }
            let Some(FileEntry {
                kind: FileKind::Symlink,
                link: Some(target),
                ..
            }) = self.entries.get(&cur.join("/"))
            else {
                continue;
            };
            hops += 1;
            if hops > MAX_HOPS {
                return None;
            }
            cur.pop();
            if target.starts_with('/') {
                cur.clear();
            }
            rest.extend(target.rsplit('/').map(str::to_string));
        }
        (!cur.is_empty()).then(|| cur.join("/"))
    }
}

/// Owners claimed per path (relative, no leading `/`), sorted and without duplicates.
#[derive(Debug, Default)]
pub struct Claims(BTreeMap<String, BTreeSet<String>>);

impl Claims {
    pub fn add(&mut self, path: String, owner: &str) {
        self.0.entry(path).or_default().insert(owner.to_string());
    }

    /// The owners of `path`, as `dpkg -S` writes them (`a, b`); `None` when nobody claims it.
    pub fn owner_of(&self, path: &str) -> Option<String> {
        let owners = self.0.get(path)?;
        Some(owners.iter().cloned().collect::<Vec<_>>().join(", "))
    }
}

/// One kind of ownership record inside an image.
pub trait OwnerReader {
    /// Whether the regular file at `path` (relative, no leading `/`) is one of this reader's
    /// records; its bytes (capped by the caller) are then handed to [`OwnerReader::claim`].
    fn wants(&self, path: &str) -> bool;
    /// Add the paths that the record at `path` assigns to an owner.
    fn claim(&self, path: &str, data: &[u8], image: &ImageView, claims: &mut Claims);
}

/// dpkg's database: `var/lib/dpkg/info/<package>.list` (or `<package>:<arch>.list`) names
/// every path of the package as packaged, one per line (`/.`, `/bin`, `/bin/ls`).
pub struct DpkgLists;

const DPKG_INFO: &str = "var/lib/dpkg/info/";

impl OwnerReader for DpkgLists {
    fn wants(&self, path: &str) -> bool {
        path.strip_prefix(DPKG_INFO)
            .and_then(|n| n.strip_suffix(".list"))
            .is_some_and(|stem| !stem.is_empty() && !stem.contains('/'))
    }

    fn claim(&self, path: &str, data: &[u8], image: &ImageView, claims: &mut Claims) {
        let Some(package) = path
            .strip_prefix(DPKG_INFO)
            .and_then(|n| n.strip_suffix(".list"))
        else {
            return;
        };
        for line in data.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\r');
            if !line.starts_with('/') {
                continue;
            }
            if let Some(at) = image.resolve(line) {
                claims.add(at, package);
            }
        }
    }
}

/// An installed Python distribution's `<site>/<name>-<version>.dist-info/RECORD`: one CSV
/// row per file, its path relative to `<site>` (`../../../bin/tool` for a script). The owner
/// is `wheel <name>`, as the build's provenance writes it.
pub struct WheelRecords;

impl WheelRecords {
    /// (site directory, project) of a RECORD path.
    fn parts(path: &str) -> Option<(&str, &str)> {
        let dist_info = path.strip_suffix("/RECORD")?;
        let (site, dir) = dist_info.rsplit_once('/').unwrap_or(("", dist_info));
        let stem = dir.strip_suffix(".dist-info")?;
        let (name, version) = stem.split_once('-')?;
        (!name.is_empty() && !version.is_empty()).then_some((site, name))
    }
}

impl OwnerReader for WheelRecords {
    fn wants(&self, path: &str) -> bool {
        Self::parts(path).is_some()
    }

    fn claim(&self, path: &str, data: &[u8], image: &ImageView, claims: &mut Claims) {
        let Some((site, name)) = Self::parts(path) else {
            return;
        };
        let owner = format!("wheel {}", name.to_lowercase().replace(['_', '.'], "-"));
        let text = String::from_utf8_lossy(data);
        for line in text.lines() {
            let Some(listed) = record_path(line) else {
                continue;
            };
            let full = if listed.starts_with('/') {
                listed
            } else {
                format!("/{site}/{listed}")
            };
            if let Some(at) = image.resolve(&full) {
                claims.add(at, &owner);
            }
        }
    }
}

/// The first CSV field of a RECORD row (quoted or not); `None` for an empty one.
fn record_path(line: &str) -> Option<String> {
    let line = line.trim_end_matches('\r');
    let field = match line.strip_prefix('"') {
        Some(rest) => {
            let mut out = String::new();
            let mut chars = rest.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        out.push('"');
                    }
                    '"' => break,
                    _ => out.push(c),
                }
            }
            out
        }
        None => line.split(',').next().unwrap_or_default().to_string(),
    };
    (!field.is_empty()).then_some(field)
}

/// Every owner reader gpuimg knows, in the order their records are read.
pub fn owner_readers() -> Vec<Box<dyn OwnerReader>> {
    vec![Box::new(DpkgLists), Box::new(WheelRecords)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: FileKind, link: Option<&str>) -> FileEntry {
        FileEntry {
            path: String::new(),
            kind,
            mode: 0o755,
            size: 0,
            layer: "os".into(),
            owner: None,
            link: link.map(str::to_string),
            machine: None,
        }
    }

    fn view_of(links: &[(&str, &str)]) -> BTreeMap<String, FileEntry> {
        let mut m = BTreeMap::new();
        m.insert("usr".into(), entry(FileKind::Dir, None));
        m.insert("usr/bin".into(), entry(FileKind::Dir, None));
        for (p, t) in links {
            m.insert(p.to_string(), entry(FileKind::Symlink, Some(t)));
        }
        m
    }

    #[test]
    fn listed_paths_follow_the_images_symlinks_but_not_the_last_component() {
        let m = view_of(&[
            ("bin", "usr/bin"),
            ("lib64", "/usr/lib64"),
            ("usr/lib64", "lib"),
            ("opt/up", "../usr/bin"),
            ("loop", "loop"),
        ]);
        let v = ImageView::new(&m);
        assert_eq!(v.resolve("/bin/ls").as_deref(), Some("usr/bin/ls"));
        assert_eq!(v.resolve("/bin").as_deref(), Some("bin"));
        assert_eq!(v.resolve("/usr/bin/ls").as_deref(), Some("usr/bin/ls"));
        assert_eq!(
            v.resolve("/lib64/ld.so").as_deref(),
            Some("usr/lib/ld.so"),
            "absolute target, then a relative one"
        );
        assert_eq!(v.resolve("/opt/up/x").as_deref(), Some("usr/bin/x"));
        assert_eq!(v.resolve("/./usr//bin/./x").as_deref(), Some("usr/bin/x"));
        assert_eq!(v.resolve("/../../etc/x").as_deref(), Some("etc/x"));
        assert_eq!(v.resolve("/loop/x"), None);
        assert_eq!(v.resolve("/."), None);
    }

    #[test]
    fn dpkg_lists_claim_their_packages_paths() {
        let r = DpkgLists;
        assert!(r.wants("var/lib/dpkg/info/coreutils.list"));
        assert!(r.wants("var/lib/dpkg/info/libc6:amd64.list"));
        assert!(!r.wants("var/lib/dpkg/info/coreutils.md5sums"));
        assert!(!r.wants("var/lib/dpkg/info/.list"));
        assert!(!r.wants("var/lib/dpkg/info/sub/x.list"));
        assert!(!r.wants("usr/var/lib/dpkg/info/x.list"));
        let m = view_of(&[("bin", "usr/bin")]);
        let v = ImageView::new(&m);
        let mut c = Claims::default();
        r.claim(
            "var/lib/dpkg/info/coreutils.list",
            b"/.\n/bin\n/bin/ls\n/usr\n\nnot-a-path\n",
            &v,
            &mut c,
        );
        r.claim(
            "var/lib/dpkg/info/bash.list",
            b"/.\r\n/usr\r\n/bin/bash\r\n",
            &v,
            &mut c,
        );
        assert_eq!(c.owner_of("usr/bin/ls").as_deref(), Some("coreutils"));
        assert_eq!(c.owner_of("usr/bin/bash").as_deref(), Some("bash"));
        assert_eq!(c.owner_of("usr").as_deref(), Some("bash, coreutils"));
        assert_eq!(c.owner_of("bin").as_deref(), Some("coreutils"));
        assert_eq!(c.owner_of("not-a-path"), None);
        assert_eq!(c.owner_of(""), None);
    }

    #[test]
    fn wheel_records_claim_their_files_relative_to_the_site_directory() {
        let r = WheelRecords;
        let site = "usr/local/lib/python3.11/dist-packages";
        let record = format!("{site}/Demo_Pkg-1.0.dist-info/RECORD");
        assert!(r.wants(&record));
        assert!(!r.wants(&format!("{site}/Demo_Pkg-1.0.dist-info/METADATA")));
        assert!(!r.wants(&format!("{site}/nodash.dist-info/RECORD")));
        let m = view_of(&[]);
        let v = ImageView::new(&m);
        let mut c = Claims::default();
        r.claim(
            &record,
            b"demo_pkg/__init__.py,sha256=x,0\n\"demo_pkg/a,b.py\",sha256=y,1\n../../../bin/demo,sha256=z,2\nDemo_Pkg-1.0.dist-info/RECORD,,\n",
            &v,
            &mut c,
        );
        let owner = Some("wheel demo-pkg".to_string());
        assert_eq!(c.owner_of(&format!("{site}/demo_pkg/__init__.py")), owner);
        assert_eq!(c.owner_of(&format!("{site}/demo_pkg/a,b.py")), owner);
        assert_eq!(c.owner_of("usr/local/bin/demo"), owner);
        assert_eq!(c.owner_of(&record), owner);
    }

    #[test]
    fn only_gpuimgs_own_components_own_their_layers() {
        assert_eq!(component_owner("files"), Some("files"));
        assert_eq!(component_owner("selftest"), Some("selftest"));
        assert_eq!(component_owner("expect"), Some("expect"));
        assert_eq!(component_owner("os"), None);
        assert_eq!(component_owner("base"), None);
    }
}
