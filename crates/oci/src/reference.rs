//! Image references parsed at the edge: a profile's `name:` ([`RepoName`]), `--tag` ([`Tag`]),
//! an image on disk as `build -o` and `inspect` name it ([`ImageRef`]: `DIR`,
//! `oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, `docker-archive:FILE[:TAG]`) and an image in a
//! registry as `build -o` names it ([`RegistryRef`]: `registry:HOST[:PORT]/REPO[:TAG]`).
//!
//! Names and tags follow the OCI distribution spec's grammars, so a name or tag gpuimg accepts
//! is one umoci, skopeo and registries accept, and a name used as a path under `out/` never
//! climbs out of it (no `..`, no empty or absolute components). Owns the grammars only; no I/O.

use std::fmt;
use std::path::{Path, PathBuf};

/// The most bytes a repository name may have (what registries commonly enforce).
pub const MAX_NAME_LEN: usize = 255;
/// The most bytes a tag may have (`{0,127}` after the first character).
pub const MAX_TAG_LEN: usize = 128;

/// Why a name or tag was refused: one short clause, shown after the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReferenceError(String);

/// A repository name: path components `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` separated by `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName(String);

impl RepoName {
    /// Check `s` against the distribution spec's repository-name grammar.
    pub fn parse(s: &str) -> Result<RepoName, ReferenceError> {
        if s.is_empty() {
            return Err(err("the name is empty"));
        }
        if s.len() > MAX_NAME_LEN {
            return Err(err(format!(
                "the name is {} bytes long; at most {MAX_NAME_LEN} are allowed",
                s.len()
            )));
        }
        for (i, component) in s.split('/').enumerate() {
            check_component(component, i)?;
        }
        Ok(RepoName(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a relative path (`a/b` → `a/b`); never absolute, never with `..`.
    pub fn as_path(&self) -> PathBuf {
        Path::new(&self.0).to_path_buf()
    }
}

fn check_component(c: &str, index: usize) -> Result<(), ReferenceError> {
    let which = format!("path component {} (`{}`)", index + 1, c.escape_debug());
    if c.is_empty() {
        return Err(err(format!(
            "path component {} is empty (a leading, trailing or doubled `/`)",
            index + 1
        )));
    }
    if c == ".." || c == "." {
        return Err(err(format!(
            "path component {} is `{c}`; a name may not climb or stay in place",
            index + 1
        )));
    }
    let bytes = c.as_bytes();
    if let Some(&b) = bytes
        .iter()
        .find(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b)))
    {
        return Err(err(format!(
            "{which} holds {}; only lowercase letters, digits and the separators `.`, `_`, `__`, `-` are allowed",
            describe(b)
        )));
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(err(format!(
            "{which} must start and end with a lowercase letter or digit"
        )));
    }
    // Runs of separators: `.`, `_`, `__` or one or more `-`, always between alphanumerics.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let run = &c[start..i];
        let ok = run == "." || run == "_" || run == "__" || run.bytes().all(|b| b == b'-');
        if !ok {
            return Err(err(format!(
                "{which} has the separator `{run}`; separators are `.`, `_`, `__` or dashes"
            )));
        }
    }
    Ok(())
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for RepoName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for RepoName {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl PartialEq<str> for RepoName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RepoName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A tag: the distribution spec's `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, narrowed to what the
/// image spec allows in `org.opencontainers.image.ref.name` (umoci and skopeo refuse the
/// rest): letters and digits joined by single `.`, `_`, `-` or by `--`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(String);

impl Tag {
    /// Check `s` against both grammars.
    pub fn parse(s: &str) -> Result<Tag, ReferenceError> {
        let bytes = s.as_bytes();
        let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
            return Err(err("the tag is empty"));
        };
        if s.len() > MAX_TAG_LEN {
            return Err(err(format!(
                "the tag is {} bytes long; at most {MAX_TAG_LEN} are allowed",
                s.len()
            )));
        }
        if let Some(&b) = bytes
            .iter()
            .find(|b| !(b.is_ascii_alphanumeric() || b"._-".contains(b)))
        {
            return Err(err(format!(
                "the tag holds {}; only letters, digits, `.`, `_` and `-` are allowed",
                describe(b)
            )));
        }
        if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
            return Err(err("a tag starts and ends with a letter or digit"));
        }
        for run in s.split(|c: char| c.is_ascii_alphanumeric()) {
            if !matches!(run, "" | "." | "_" | "-" | "--") {
                return Err(err(format!(
                    "the tag has the separator `{run}`; separators are one `.`, `_` or `-`, or `--`"
                )));
            }
        }
        Ok(Tag(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tag {
    /// `latest`.
    fn default() -> Self {
        Tag("latest".into())
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Tag {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Tag {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tag::parse(s)
    }
}

impl std::str::FromStr for RepoName {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RepoName::parse(s)
    }
}

/// How an image is stored on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// An OCI image layout directory (`oci:DIR`, or a plain `DIR`).
    Layout,
    /// An oci-archive: the layout as one tar file (`oci-archive:FILE`).
    Archive,
    /// A docker-archive (`docker save`'s format, `docker-archive:FILE`): written by `build`,
    /// not read by `inspect`.
    DockerArchive,
}

impl Transport {
    /// The prefix that names it (`oci`, `oci-archive`, `docker-archive`).
    pub fn prefix(self) -> &'static str {
        match self {
            Transport::Layout => "oci",
            Transport::Archive => "oci-archive",
            Transport::DockerArchive => "docker-archive",
        }
    }
}

/// Transports of other tools that gpuimg does not read or write, refused by name.
/// The transports gpuimg itself speaks, for "did you mean".
const OURS: &[&str] = &["oci", "oci-archive", "docker-archive", "registry"];

/// Whether `word` (what comes before the first `:`) has a transport's shape: lowercase
/// letters, digits and `-`, starting with a letter (`./x:y` and `a/b:c` are paths).
fn looks_like_transport(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

const OTHER_TRANSPORTS: &[&str] = &[
    "docker",
    "docker-daemon",
    "containers-storage",
    "dir",
    "ostree",
    "sif",
];

/// An image on disk: `DIR` (a layout; the whole text is the path), or `oci:DIR[:TAG]` /
/// `oci-archive:FILE[:TAG]` / `docker-archive:FILE[:TAG]`, where, as in skopeo, the first `:` after the prefix starts the
/// tag. The tag is what a layout's index records as `org.opencontainers.image.ref.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub transport: Transport,
    pub path: PathBuf,
    pub tag: Option<String>,
}

impl ImageRef {
    /// Parse `s`; a refusal names what is wrong in one clause.
    pub fn parse(s: &str) -> Result<ImageRef, ReferenceError> {
        if s.is_empty() {
            return Err(err("the image reference is empty"));
        }
        if let Some(b) = s.bytes().find(|b| b.is_ascii_control()) {
            return Err(err(format!("the image reference holds {}", describe(b))));
        }
        let (transport, rest) = if let Some(r) = s.strip_prefix("oci-archive:") {
            (Transport::Archive, r)
        } else if let Some(r) = s.strip_prefix("docker-archive:") {
            (Transport::DockerArchive, r)
        } else if let Some(r) = s.strip_prefix("oci:") {
            (Transport::Layout, r)
        } else {
            if let Some((scheme, _)) = s.split_once(':') {
                if OTHER_TRANSPORTS.contains(&scheme) {
                    return Err(err(format!(
                        "`{scheme}:` is another tool's transport; gpuimg reads and writes `oci:DIR`, `oci-archive:FILE` or a plain DIR, and writes `docker-archive:FILE`"
                    )));
                }
                // A word before `:` reads as a transport, never silently as a directory name.
                if looks_like_transport(scheme) {
                    let near = OURS
                        .iter()
                        .map(|t| (strsim::damerau_levenshtein(scheme, t), *t))
                        .min()
                        .filter(|(d, _)| *d <= 3)
                        .map(|(_, t)| format!("did you mean `{t}:`? "))
                        .unwrap_or_default();
                    return Err(err(format!(
                        "`{scheme}:` is not a transport; {near}gpuimg knows `oci:`, `oci-archive:`, `docker-archive:` and `registry:` (a directory whose name holds `:` is written `./{s}`)"
                    )));
                }
            }
            return Ok(ImageRef {
                transport: Transport::Layout,
                path: PathBuf::from(s),
                tag: None,
            });
        };
        let prefix = transport.prefix();
        let (path, tag) = match rest.split_once(':') {
            Some((p, t)) => (p, Some(t)),
            None => (rest, None),
        };
        if path.is_empty() {
            return Err(err(format!("`{prefix}:` is followed by no path")));
        }
        match tag {
            Some("") => Err(err(format!("the tag after `{prefix}:{path}:` is empty"))),
            Some(t) if t.contains(':') => Err(err(format!(
                "the tag `{t}` holds `:`; a `{prefix}:` path cannot hold `:` either"
            ))),
            _ => Ok(ImageRef {
                transport,
                path: PathBuf::from(path),
                tag: tag.map(String::from),
            }),
        }
    }
}

impl fmt::Display for ImageRef {
    /// `oci:DIR[:TAG]` or `oci-archive:FILE[:TAG]` (a plain DIR is shown as `oci:DIR`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.transport.prefix(), self.path.display())?;
        match &self.tag {
            Some(t) => write!(f, ":{t}"),
            None => Ok(()),
        }
    }
}

impl std::str::FromStr for ImageRef {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImageRef::parse(s)
    }
}

/// An image in a registry, as `build -o` names it: `registry:HOST[:PORT]/REPO[:TAG]` or, as
/// skopeo spells it, `docker://HOST[:PORT]/REPO[:TAG]`. The host is always explicit (gpuimg
/// knows no default registry): a first component with a `.` or a `:`, `localhost`, or an IPv6
/// literal in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRef {
    /// `HOST[:PORT]` as written (the key credentials are looked up by).
    pub registry: String,
    pub repo: RepoName,
    pub tag: Option<String>,
}

impl RegistryRef {
    /// Whether `s` names a registry (`registry:` or `docker://`), so it must parse as one.
    pub fn is_registry(s: &str) -> bool {
        s.starts_with("registry:") || s.starts_with("docker://")
    }

    /// Parse `registry:…` / `docker://…`; a refusal names what is wrong in one clause.
    pub fn parse(s: &str) -> Result<RegistryRef, ReferenceError> {
        let rest = s
            .strip_prefix("registry:")
            .map(|r| r.strip_prefix("//").unwrap_or(r))
            .or_else(|| s.strip_prefix("docker://"))
            .ok_or_else(|| err("a registry reference starts with `registry:` or `docker://`"))?;
        if let Some(b) = rest.bytes().find(|b| b.is_ascii_control() || *b == b' ') {
            return Err(err(format!("the registry reference holds {}", describe(b))));
        }
        if rest.contains('@') {
            return Err(err(
                "a push names a tag, not a digest (`@…`): the registry computes the digest",
            ));
        }
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(err(format!(
                "`{rest}` names no repository: write `HOST[:PORT]/REPO[:TAG]`"
            )));
        };
        check_registry_host(registry)?;
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        let repo = RepoName::parse(repo)
            .map_err(|e| err(format!("the repository `{repo}` is not valid: {e}")))?;
        if let Some(t) = tag {
            Tag::parse(t).map_err(|e| err(format!("the tag `{t}` is not valid: {e}")))?;
        }
        Ok(RegistryRef {
            registry: registry.to_string(),
            repo,
            tag: tag.map(String::from),
        })
    }

    /// The host without its port (and without an IPv6 literal's brackets).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }
}

fn host_of(registry: &str) -> &str {
    if let Some(r) = registry.strip_prefix('[') {
        return r.split(']').next().unwrap_or(r);
    }
    registry.split(':').next().unwrap_or(registry)
}

fn check_registry_host(registry: &str) -> Result<(), ReferenceError> {
    if registry.is_empty() {
        return Err(err("the registry host is empty"));
    }
    let explicit = registry.contains('.')
        || registry.contains(':')
        || registry.starts_with('[')
        || registry == "localhost";
    if !explicit {
        return Err(err(format!(
            "`{registry}` is not a registry host: name it in full (`HOST[:PORT]/REPO`, e.g. `localhost:5000/{registry}`); gpuimg has no default registry"
        )));
    }
    let (host, port) = if let Some(r) = registry.strip_prefix('[') {
        let Some((h, after)) = r.split_once(']') else {
            return Err(err(format!("`{registry}` opens `[` and never closes it")));
        };
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(err(format!("`[{h}]` is not an IPv6 address")));
        }
        match after {
            "" => (h, None),
            p => match p.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None => return Err(err(format!("`{registry}` has `{p}` after its address"))),
            },
        }
    } else {
        match registry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (registry, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(format!(
                "the port `{p}` of `{registry}` is not a number"
            )));
        }
        if p.parse::<u32>().map_or(true, |n| n == 0 || n > 65535) {
            return Err(err(format!(
                "the port `{p}` of `{registry}` is out of range"
            )));
        }
    }
    if !registry.starts_with('[') {
        let ok = host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
        if !ok {
            return Err(err(format!("`{host}` is not a host name or address")));
        }
    }
    Ok(())
}

impl fmt::Display for RegistryRef {
    /// `HOST[:PORT]/REPO[:TAG]`, as skopeo's `docker://` shows it without the prefix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repo)?;
        match &self.tag {
            Some(t) => write!(f, ":{t}"),
            None => Ok(()),
        }
    }
}

fn err(s: impl Into<String>) -> ReferenceError {
    ReferenceError(s.into())
}

/// A byte as a reader sees it: `/`, a space, a newline, or its code.
fn describe(b: u8) -> String {
    match b {
        b' ' => "a space".into(),
        b'\n' => "a newline".into(),
        b'\t' => "a tab".into(),
        b'\r' => "a carriage return".into(),
        b'/' => "`/`".into(),
        0x21..=0x7e => format!("`{}`", b as char),
        b if b >= 0x80 => "a non-ASCII character".into(),
        b => format!("the control character 0x{b:02x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_references() {
        let r = RegistryRef::parse("registry:localhost:5000/a/b:v1").unwrap();
        assert_eq!(r.registry, "localhost:5000");
        assert_eq!(r.repo, "a/b");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.host(), "localhost");
        assert_eq!(r.to_string(), "localhost:5000/a/b:v1");
        let r = RegistryRef::parse("docker://registry.example.com/team/cuda").unwrap();
        assert_eq!(r.registry, "registry.example.com");
        assert_eq!(r.tag, None);
        let r = RegistryRef::parse("docker://[::1]:5000/x:t").unwrap();
        assert_eq!(r.host(), "::1");
        let r = RegistryRef::parse("registry://127.0.0.1:5000/x").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        for bad in [
            "registry:",
            "registry:localhost:5000",
            "docker://busybox:latest",
            "docker://library/busybox",
            "registry:host.example/Repo",
            "registry:host.example/repo:bad..tag",
            "registry:host.example:0/repo",
            "registry:host.example:99999/repo",
            "registry:host.example:5x/repo",
            "registry:ho_st.example/repo",
            "registry:host.example/repo@sha256:00",
            "registry:[zz]:5000/repo",
            "registry:host.example/a b",
        ] {
            assert!(RegistryRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_the_grammar_accepts() {
        for ok in [
            "a",
            "demo",
            "cuda-runtime",
            "org/cuda.runtime",
            "a/b/c",
            "a__b",
            "a_b",
            "a---b",
            "a.b-c_d__e",
            "0",
            "9x/y9",
        ] {
            assert!(RepoName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn names_the_grammar_refuses() {
        let long = "a".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            "/",
            "/a",
            "a/",
            "a//b",
            "..",
            "a/..",
            "a/../../../x",
            "./a",
            "a/./b",
            ".a",
            "a.",
            "-a",
            "a-",
            "_a",
            "a___b",
            "a..b",
            "a.-b",
            "a_-b",
            "A",
            "Demo",
            "a b",
            "a\nb",
            "a\0b",
            "a:b",
            "a@b",
            "é",
            long.as_str(),
        ] {
            assert!(RepoName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags_the_grammar_accepts() {
        let max = "t".repeat(MAX_TAG_LEN);
        for ok in [
            "latest",
            "v1.2.3",
            "1",
            "A-b_c.D",
            "a--b",
            "12.0-cudnn9_rc1",
            max.as_str(),
        ] {
            assert!(Tag::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn tags_the_grammar_refuses() {
        let long = "t".repeat(MAX_TAG_LEN + 1);
        for bad in [
            "",
            "../x",
            ".x",
            "-x",
            "_",
            "_x",
            "x_",
            "x.",
            "x..y",
            "a__b",
            "a---b",
            "a-_b",
            "a/b",
            "a b",
            " a",
            "a\n",
            "a\tb",
            "a:b",
            "a@sha256",
            "ä",
            "a\0",
            long.as_str(),
        ] {
            assert!(Tag::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn image(s: &str) -> (Transport, String, Option<String>) {
        let r = ImageRef::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        (r.transport, r.path.display().to_string(), r.tag)
    }

    #[test]
    fn image_references_that_parse() {
        use Transport::*;
        for (s, want) in [
            ("out/demo", (Layout, "out/demo", None)),
            ("/abs/dir", (Layout, "/abs/dir", None)),
            // A path is all path, colons included, once it cannot read as a transport.
            ("./weird:name", (Layout, "./weird:name", None)),
            ("d/weird:name", (Layout, "d/weird:name", None)),
            ("oci:out/demo", (Layout, "out/demo", None)),
            ("oci:out/demo:v1", (Layout, "out/demo", Some("v1"))),
            ("oci:/abs/x:latest", (Layout, "/abs/x", Some("latest"))),
            ("oci-archive:img.tar", (Archive, "img.tar", None)),
            (
                "oci-archive:d/img.tar:1.0",
                (Archive, "d/img.tar", Some("1.0")),
            ),
            ("oci:oci-archive", (Layout, "oci-archive", None)),
            ("docker-archive:img.tar", (DockerArchive, "img.tar", None)),
            (
                "docker-archive:d/img.tar:v2",
                (DockerArchive, "d/img.tar", Some("v2")),
            ),
        ] {
            let want = (want.0, want.1.to_string(), want.2.map(String::from));
            assert_eq!(image(s), want, "{s}");
        }
    }

    #[test]
    fn image_references_refused_in_one_clause() {
        for (bad, needle) in [
            ("", "empty"),
            ("oci:", "no path"),
            ("oci-archive:", "no path"),
            ("oci::v1", "no path"),
            ("oci:dir:", "tag after `oci:dir:` is empty"),
            ("oci-archive:f.tar:", "is empty"),
            ("oci:dir:a:b", "holds `:`"),
            ("docker://busybox", "`docker:` is another tool's transport"),
            ("docker-archive:", "no path"),
            ("docker-daemon:x", "`docker-daemon:`"),
            ("weird:name", "`weird:` is not a transport"),
            ("oci-achive:x.tar", "did you mean `oci-archive:`?"),
            ("containers-storage:x", "`containers-storage:`"),
            ("dir:x", "`dir:`"),
            ("oci:dir\nx", "a newline"),
            ("out\tdemo", "a tab"),
        ] {
            let e = ImageRef::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{bad:?}: {e}");
        }
    }

    #[test]
    fn image_references_display_as_parsed() {
        for s in [
            "oci:out/demo",
            "oci:out/demo:v1",
            "oci-archive:a.tar:x",
            "docker-archive:a.tar:x",
        ] {
            assert_eq!(ImageRef::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(ImageRef::parse("out").unwrap().to_string(), "oci:out");
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let e = RepoName::parse("a/../x").unwrap_err().to_string();
        assert!(e.contains("`..`"), "{e}");
        let e = RepoName::parse("a//b").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = Tag::parse("a b").unwrap_err().to_string();
        assert!(e.contains("a space"), "{e}");
    }
}
