//! pip's requirements-file format, the part that describes wheels: one PEP 508 requirement per
//! line with `--hash=sha256:...` options (enforced), `-r`/`-c` includes (requirements and
//! constraints, confined to the build context like `files.src`), `--require-hashes`, `--pre`,
//! comments and `\` continuations. Options that would take packages from elsewhere or build
//! them (`-e`, `--no-binary`, `--index-url` ...) are refused with what to do instead.
//! Must never open a file outside the context, and never follow more than [`MAX_DEPTH`]
//! includes or read more than [`MAX_FILE_BYTES`] of one file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use gpuimg_store::digest::Digest;

use super::PypiError;

pub const MAX_DEPTH: usize = 16;
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// One requirement line.
#[derive(Debug, Clone)]
pub struct Line {
    pub requirement: pep508_rs::Requirement,
    /// The requirement as written (without options).
    pub text: String,
    /// `file:line`.
    pub origin: String,
    /// Its `--hash` values (sha256 only).
    pub hashes: Vec<Digest>,
}

/// What a requirements file (with its includes) asks for.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub requirements: Vec<Line>,
    pub constraints: Vec<Line>,
    /// `--require-hashes`, or any `--hash` (pip's hash-checking mode).
    pub require_hashes: bool,
    /// `--pre`: pre-releases are candidates.
    pub pre: bool,
}

/// Read `path` (already checked to lie in `context`) and its includes.
pub fn read(path: &Path, context: &Path) -> Result<Parsed, PypiError> {
    let mut out = Parsed::default();
    let mut seen = BTreeSet::new();
    read_into(path, context, false, 0, &mut seen, &mut out)?;
    out.require_hashes |= out
        .requirements
        .iter()
        .chain(&out.constraints)
        .any(|l| !l.hashes.is_empty());
    Ok(out)
}

fn read_into(
    path: &Path,
    context: &Path,
    constraints: bool,
    depth: usize,
    seen: &mut BTreeSet<(PathBuf, bool)>,
    out: &mut Parsed,
) -> Result<(), PypiError> {
    use std::io::Read;
    if !seen.insert((path.to_path_buf(), constraints)) {
        return Ok(());
    }
    let shown = path.display().to_string();
    let mut text = String::new();
    // Only a regular file on a real file system (never a FIFO, a device or procfs's
    // `environ`): what is quoted from it in an error must be the user's text.
    let file = gpuimg_store::user_file::open_regular(path)
        .map_err(|e| PypiError::bad(&shown, e.to_string()))?;
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| PypiError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(PypiError::bad(
            &shown,
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    for (number, line) in logical_lines(&text) {
        let origin = format!("{shown}:{number}");
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = words.first() else { continue };
        if first.starts_with('-') {
            match option(&words) {
                Opt::Include(target, as_constraints) => {
                    if depth + 1 >= MAX_DEPTH {
                        return Err(PypiError::bad(
                            origin,
                            format!("includes nest deeper than {MAX_DEPTH} files"),
                        ));
                    }
                    let inc =
                        include(path, target, context).map_err(|m| PypiError::bad(&origin, m))?;
                    read_into(
                        &inc,
                        context,
                        constraints || as_constraints,
                        depth + 1,
                        seen,
                        out,
                    )?;
                }
                Opt::RequireHashes => out.require_hashes = true,
                Opt::Pre => out.pre = true,
                Opt::Ignored => {}
                Opt::Refused(m) => return Err(PypiError::bad(origin, m)),
            }
            continue;
        }
        let parsed = requirement_line(&line).map_err(|m| PypiError::bad(&origin, m))?;
        let (requirement, text, hashes) = parsed;
        let l = Line {
            requirement,
            text,
            origin,
            hashes,
        };
        if constraints {
            out.constraints.push(l);
        } else {
            out.requirements.push(l);
        }
    }
    Ok(())
}

/// Lines with `\` continuations joined and comments removed, numbered by their first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut acc = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if acc.is_empty() {
            start = i + 1;
        }
        let line = strip_comment(raw);
        if let Some(head) = line.strip_suffix('\\') {
            acc.push_str(head);
            acc.push(' ');
            continue;
        }
        acc.push_str(line);
        if !acc.trim().is_empty() {
            out.push((start, acc.trim().to_string()));
        }
        acc.clear();
    }
    if !acc.trim().is_empty() {
        out.push((start, acc.trim().to_string()));
    }
    out
}

/// A `#` at the start or after whitespace begins a comment.
fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace()) {
            return line[..i].trim_end();
        }
    }
    line.trim_end()
}

enum Opt<'a> {
    Include(&'a str, bool),
    RequireHashes,
    Pre,
    Ignored,
    Refused(String),
}

/// An option line (its words).
fn option<'a>(words: &[&'a str]) -> Opt<'a> {
    let (name, inline) = match words[0].split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (words[0], None),
    };
    let (name, inline) = match (name, inline) {
        (n, None) if n.len() > 2 && n.starts_with("-r") && !n.starts_with("--") => {
            ("-r", Some(&n[2..]))
        }
        (n, None) if n.len() > 2 && n.starts_with("-c") && !n.starts_with("--") => {
            ("-c", Some(&n[2..]))
        }
        x => x,
    };
    let value = inline.or_else(|| words.get(1).copied());
    let elsewhere = |what: &str| {
        Opt::Refused(format!(
            "`{name}` is not read from a requirements file; set {what} in the profile"
        ))
    };
    match name {
        "-r" | "--requirement" | "-c" | "--constraint" => match value {
            Some(v) => Opt::Include(v, name.starts_with("-c") || name == "--constraint"),
            None => Opt::Refused(format!("`{name}` needs a file")),
        },
        "--require-hashes" => Opt::RequireHashes,
        "--pre" => Opt::Pre,
        "--only-binary" | "--prefer-binary" => Opt::Ignored,
        "-i" | "--index-url" | "--extra-index-url" | "--no-index" => {
            elsewhere("`python.index` or `python.extra-indexes`")
        }
        "-f" | "--find-links" => elsewhere("`python.find-links`"),
        "--trusted-host" => Opt::Refused(
            "`--trusted-host` is not supported: indexes are checked against the host's trusted certificates".into(),
        ),
        "-e" | "--editable" => {
            Opt::Refused("editable requirements are not supported: gpuimg installs wheels".into())
        }
        "--no-binary" => Opt::Refused(
            "`--no-binary` is not supported: gpuimg installs wheels and never builds from source".into(),
        ),
        other => Opt::Refused(format!("`{other}` is not a supported requirements-file option")),
    }
}

/// An include's path, relative to the including file, which must lie in `context`.
fn include(from: &Path, target: &str, context: &Path) -> Result<PathBuf, String> {
    if target.contains("://") {
        return Err(format!(
            "`{target}`: includes must be files in the build context"
        ));
    }
    let base = from.parent().unwrap_or(Path::new("."));
    let given = base.join(target);
    let real = fs_err::canonicalize(&given).map_err(|e| e.to_string())?;
    if !real.starts_with(context) {
        return Err(format!(
            "`{}` is outside the build context `{}`",
            given.display(),
            context.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("`{}` is not a file", given.display()));
    }
    Ok(real)
}

type ReqLine = (pep508_rs::Requirement, String, Vec<Digest>);

/// A requirement line: the PEP 508 part, then `--hash` options.
fn requirement_line(line: &str) -> Result<ReqLine, String> {
    // Options start at the first ` --` (a PEP 508 string holds no such word).
    let (req, opts) = match line.find(" --") {
        Some(i) => (line[..i].trim(), line[i..].trim()),
        None => (line.trim(), ""),
    };
    crate::requirement::check(req).map_err(|e| e.to_string())?;
    let requirement = pep508_rs::Requirement::from_str(req)
        .map_err(|e| format!("`{req}` is not a PEP 508 requirement: {e}"))?;
    let mut hashes = Vec::new();
    let mut words = opts.split_whitespace();
    while let Some(w) = words.next() {
        let value = match w.split_once('=') {
            Some(("--hash", v)) => v.to_string(),
            None if w == "--hash" => words
                .next()
                .ok_or_else(|| "`--hash` needs a value".to_string())?
                .to_string(),
            _ => {
                return Err(format!(
                    "`{w}` is not a supported requirement option (only `--hash`)"
                ))
            }
        };
        let (algo, hex) = value
            .split_once(':')
            .ok_or_else(|| format!("`--hash={value}` is not `sha256:<hex>`"))?;
        if algo != "sha256" {
            return Err(format!(
                "`--hash={value}`: only sha256 hashes are supported"
            ));
        }
        hashes.push(Digest::from_hex(hex).map_err(|e| format!("`--hash={value}`: {e}"))?);
    }
    Ok((requirement, req.to_string(), hashes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn lines_hashes_includes_and_constraints() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = fs_err::canonicalize(dir.path()).unwrap();
        let h = "a".repeat(64);
        write(&ctx, "c.txt", "idna<4  # pin\n");
        let main = write(
            &ctx,
            "r.txt",
            &format!(
                "# top\nrequests>=2 \\\n    --hash=sha256:{h}\nnumpy; python_version < \"3.12\"\n-c c.txt\n--pre\n"
            ),
        );
        let p = read(&main, &ctx).unwrap();
        assert_eq!(p.requirements.len(), 2);
        assert_eq!(p.requirements[0].text, "requests>=2");
        assert_eq!(p.requirements[0].hashes.len(), 1);
        assert!(
            p.requirements[0].origin.ends_with("r.txt:2"),
            "{}",
            p.requirements[0].origin
        );
        assert_eq!(p.constraints.len(), 1);
        assert!(p.require_hashes && p.pre);
    }

    #[test]
    fn refusals_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ctx")).unwrap();
        std::fs::write(dir.path().join("outside.txt"), "x\n").unwrap();
        let ctx = fs_err::canonicalize(dir.path().join("ctx")).unwrap();
        for (text, want) in [
            ("-e ./pkg\n", "editable"),
            ("--index-url https://x/simple\n", "python.index"),
            ("requests --hash=md5:00\n", "only sha256"),
            ("requests --global-option=x\n", "only `--hash`"),
            ("-r ../outside.txt\n", "outside the build context"),
            ("numpy>=>1\n", "PEP 508"),
            ("--no-binary :all:\n", "never builds"),
        ] {
            let p = write(&ctx, "r.txt", &format!("ok\n{text}"));
            let e = read(&p, &ctx).unwrap_err().to_string();
            assert!(e.contains("r.txt:2: ") && e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn include_cycles_end() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = fs_err::canonicalize(dir.path()).unwrap();
        write(&ctx, "b.txt", "-r a.txt\nidna\n");
        let a = write(&ctx, "a.txt", "-r b.txt\nrequests\n");
        let p = read(&a, &ctx).unwrap();
        let names: Vec<&str> = p.requirements.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(names, ["idna", "requests"]);
    }
}
