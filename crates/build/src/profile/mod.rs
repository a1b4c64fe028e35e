//! Stage 1, `profile`: read a profile file into a validated [`Profile`].
//!
//! Owns the v1 profile contract (docs/profile.md): parsing, `${VAR}` expansion inside
//! scalars (after the YAML is parsed, so a value never adds structure), unknown-key and type
//! errors with file:line:column, paths made relative to the profile's directory, `files.src`
//! confined to the build context (`context:`).
//! Must never touch the network or resolve versions: constraints are kept as written, with
//! their positions, for `resolve`.

mod de;
mod error;
mod expand;
mod layers;
mod located;
mod node;
mod python_section;
mod schema;
mod sources;
mod validate;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use error::ProfileError;
pub use gpuimg_oci::image::Platform;
pub use layers::{Layer, RESERVED_LAYER_NAMES};
pub use located::Located;
pub use python_section::{FindLink, Python, RESERVED_INDEX_NAMES};
pub use schema::{
    AptRepoSpec, AptSpec, BandwidthFloors, CompatMode, ConfigSpec, FileSpec, HostSpec,
    KernelModule, LayerSpec, LayersSpec, OnFailure, ProfileKind, ProviderKind, ProvidersSpec,
    PythonSpec, SelftestBinarySpec, SelftestLevel, SelftestSpec, StackSpec, StripClass,
};
pub use sources::join as resolve_path;
pub use validate::{Base, FileEntry};

/// A loaded, validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The path as the user gave it (used in messages).
    pub file: String,
    /// Directory that relative paths are resolved against.
    pub dir: PathBuf,
    /// The profile text as read, before `${VAR}` expansion.
    pub text: String,
    /// `kind:`: a container image (default) or a host (a node's kernel and driver).
    pub kind: ProfileKind,
    pub name: gpuimg_oci::reference::RepoName,
    /// The platform this run of the pipeline is for: the profile's `platform`, or one of its
    /// `platforms` ([`Profile::for_platform`]).
    pub platform: Platform,
    /// Every platform the profile builds, in the order written (one for `platform:`); more
    /// than one makes an image index.
    pub platforms: Vec<Platform>,
    pub base: Base,
    pub host: HostSpec,
    pub stack: StackSpec,
    pub compat: CompatMode,
    pub files: Vec<FileEntry>,
    pub strip: Vec<StripClass>,
    pub selftest: SelftestSpec,
    pub config: ConfigSpec,
    /// `layers:` in the order written: packages assigned to named component layers.
    pub layers: Vec<Layer>,
    /// `python:`: Python packages from a package index (`None` without the key).
    pub python: Option<Python>,
    /// `libraries:`: SONAME → the package or wheel (by name) whose copy the loader finds where
    /// two provide it (the others' copies stay private to them).
    pub libraries: std::collections::BTreeMap<String, String>,
    /// `providers:`: where each pinned CUDA library comes from (wheels unless it says `apt`).
    pub providers: ProvidersSpec,
}

impl Profile {
    /// The profile as one platform's pipeline sees it: `platform` is `p`; `platforms` (what
    /// the lock's inputs record) stays the whole list.
    pub fn for_platform(&self, p: &Platform) -> Profile {
        Profile {
            platform: p.clone(),
            ..self.clone()
        }
    }

    /// Whether the profile builds an image index (more than one platform).
    pub fn is_index(&self) -> bool {
        self.platforms.len() > 1
    }
}

/// Load and validate the profile at `path`, expanding `${VAR}` through `env` (the CLI passes
/// its settings' snapshot of the environment; this module never reads the environment).
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Profile, ProfileError> {
    let shown = path.display().to_string();
    let read_err = |source| ProfileError::Read {
        path: shown.clone(),
        source,
    };
    let mut text = String::new();
    fs_err::File::open(path)
        .map_err(read_err)?
        .take(node::MAX_PROFILE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() > node::MAX_PROFILE_BYTES {
        return Err(ProfileError::TooLarge {
            path: shown,
            limit: node::MAX_PROFILE_BYTES,
        });
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    parse(&text, &shown, &dir, env)
}

/// Parse profile text. `file` is used in messages; `dir` anchors relative paths.
///
/// The YAML is parsed first and `${VAR}` expanded inside each scalar after, so a variable's
/// value is always text within one value, never structure.
pub fn parse(
    text: &str,
    file: &str,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Profile, ProfileError> {
    let root = node::build(text, env).map_err(|p| ProfileError::Syntax {
        file: file.to_string(),
        line: p.pos.line as usize,
        column: p.pos.column as usize,
        message: error::one_line(&p.message),
    })?;
    let raw: schema::RawProfile = de::from_node(&root).map_err(|e| {
        let pos = e.pos.unwrap_or(root.pos);
        let message = error::one_line(&capitalise(&e.message()));
        ProfileError::Syntax {
            file: file.to_string(),
            line: pos.line as usize,
            column: pos.column as usize,
            message: match e.path {
                Some(path) => format!("{path}: {message}"),
                None => message,
            },
        }
    })?;
    validate::validate(raw, &root, file, dir, text.to_string())
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Profile, ProfileError> {
        parse(s, "p.yaml", Path::new("/nonexistent"), &|_| None)
    }

    #[test]
    fn minimal_profile() {
        let p = parse_str("name: demo\n").unwrap();
        assert_eq!(p.name, "demo");
        assert_eq!(p.platform.architecture, "amd64");
        assert!(matches!(p.base, Base::None));
    }

    #[test]
    fn unknown_key_has_position() {
        let e = parse_str("name: demo\nconfig:\n  entrypint: [sh]\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("p.yaml:3:3: Unknown field `entrypint`"),
            "{s}"
        );
    }

    #[test]
    fn wrong_type_has_position() {
        let e = parse_str("name: demo\nselftest:\n  enabled: maybe\n").unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:3:12:"), "{e}");
    }

    #[test]
    fn missing_name() {
        let e = parse_str("platform: linux/amd64\n").unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
    }

    #[test]
    fn both_bases_refused() {
        let e =
            parse_str("name: x\nbase:\n  rootfs: ./r.tar\n  apt: {suite: bookworm}\n").unwrap_err();
        assert!(e.to_string().contains("exactly one of"), "{e}");
    }
}

#[cfg(test)]
mod typing_tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "N" => Some("2".into()),
            "V" => Some("12.40".into()),
            "EMPTY" => Some(String::new()),
            "EVIL" => Some("x\nfiles:\n  - {src: /etc, dst: /e}".into()),
            "KEY" => Some("evil: 1\nname".into()),
            _ => None,
        }
    }

    fn load(s: &str) -> Result<Profile, String> {
        parse(s, "p.yaml", Path::new("/nonexistent"), &env).map_err(|e| e.to_string())
    }

    #[test]
    fn sole_reference_types_as_its_value() {
        let p = load("name: x\nselftest:\n  min-gpus: ${N}\n").unwrap();
        assert_eq!(p.selftest.min_gpus, Some(2));
        let e = load("name: x\nselftest:\n  min-gpus: \"${N}\"\n").unwrap_err();
        assert_eq!(
            e,
            "p.yaml:3:13: selftest.min-gpus: Invalid type: string \"2\", expected a whole number (0 or more)"
        );
        let e = load("name: x\nselftest:\n  min-gpus: ${N}${N}x\n").unwrap_err();
        assert!(
            e.starts_with("p.yaml:3:13: selftest.min-gpus: Invalid type: string"),
            "{e}"
        );
        let p = load("name: x\nselftest:\n  min-gpus: ${EMPTY}\n").unwrap();
        assert_eq!(p.selftest.min_gpus, None);
    }

    #[test]
    fn strings_keep_their_text() {
        let p = load("name: x\nstack:\n  cuda: ${V}\n  cudnn: 9.10\n  nccl: '${N}'\n").unwrap();
        assert_eq!(
            p.stack.cuda.as_ref().map(|c| c.value.as_str()),
            Some("12.40")
        );
        assert_eq!(
            p.stack.cudnn.as_ref().map(|c| c.value.as_str()),
            Some("9.10")
        );
        assert_eq!(p.stack.nccl.as_ref().map(|c| c.value.as_str()), Some("2"));
        let c = p.stack.cuda.unwrap();
        assert_eq!((c.line, c.column), (3, 9));
    }

    #[test]
    fn values_never_become_structure() {
        for text in [
            "name: x\nconfig:\n  user: ${EVIL}\n",
            "name: x\nconfig:\n  user: \"${EVIL}\"\n",
            "name: x\nconfig:\n  user: |\n    ${EVIL}\n",
            "name: x\nconfig:\n  env: {A: \"${EVIL}\"}\n",
        ] {
            let p = load(text).unwrap();
            assert!(p.files.is_empty(), "{text}");
            let got = p
                .config
                .user
                .clone()
                .unwrap_or_else(|| p.config.env["A"].clone());
            assert!(
                got.starts_with("x\nfiles:\n  - {src: /etc, dst: /e}"),
                "{got:?}"
            );
        }
        // A key from a variable is one key, whatever its value holds.
        let p = load("name: x\nconfig:\n  labels:\n    ${KEY}: v\n").unwrap();
        assert_eq!(
            p.config.labels.keys().collect::<Vec<_>>(),
            ["evil: 1\nname"]
        );
        let e = load("name: x\n${KEY}: 1\n").unwrap_err();
        assert!(
            e.starts_with("p.yaml:2:1: Unknown field `evil: 1\\nname`"),
            "{e}"
        );
    }

    #[test]
    fn booleans_and_empty_collections() {
        let p = load("name: x\nselftest:\n  enabled: no\n").unwrap();
        assert!(!p.selftest.enabled);
        let e = load("name: x\nselftest:\n  enabled: \"true\"\n").unwrap_err();
        assert!(
            e.contains("selftest.enabled: Invalid type: string \"true\""),
            "{e}"
        );
        let p = load("name: x\nfiles:\nstrip: ~\nhost:\n").unwrap();
        assert!(p.files.is_empty() && p.strip.is_empty());
    }

    #[test]
    fn shapes_are_named_in_profile_words() {
        let e = load("- name: x\n").unwrap_err();
        assert_eq!(
            e,
            "p.yaml:1:1: Invalid type: sequence, expected a mapping of keys"
        );
        let e = load("name: x\nhost:\n  kernel_module: [open]\n").unwrap_err();
        assert_eq!(
            e,
            "p.yaml:3:18: host.kernel_module: Invalid type: sequence, expected a name"
        );
        let e = load("name: x\nhost:\n  kernel_module: closed\n").unwrap_err();
        assert!(
            e.starts_with("p.yaml:3:18: host.kernel_module: Unknown variant `closed`"),
            "{e}"
        );
        let e = load("name: x\nselftest:\n  floors: {host-device-gbps: fast}\n").unwrap_err();
        assert!(e.ends_with("expected a number"), "{e}");
        let e = load("name: x\nbase: {rootfs: a, rootfs: b}\n").unwrap_err();
        assert_eq!(e, "p.yaml:2:19: Duplicate key `rootfs` (first at 2:8)");
    }

    #[test]
    fn merge_keys_still_work() {
        let p =
            load("name: x\nconfig:\n  labels: &l {a: \"1\"}\n  env:\n    <<: *l\n    B: \"2\"\n")
                .unwrap();
        assert_eq!(p.config.env.len(), 2);
    }

    #[test]
    fn escapes_and_comments() {
        let p = load("name: x # ${NOPE}\n# ${NOPE}\nconfig:\n  user: $${N}\n").unwrap();
        assert_eq!(p.config.user.as_deref(), Some("${N}"));
    }
}
