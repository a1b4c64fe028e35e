//! Where the host says its Python packages come from, read from values the settings phase
//! gathered: the index variables (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `PIP_INDEX_URL`, the
//! extra-index and find-links ones), pip's configuration files (INI, `[global]` then
//! `[install]`, later files win) and uv's (`uv.toml`), and, when none names an index, pip's
//! own default, asked of the host's `python3 -m pip` (never written here).
//! Must never read the environment itself, and never run anything but the host's Python to
//! ask pip that one question (with a time limit).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What pip's and uv's configuration files say (each `None`/empty when unsaid).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileConfig {
    /// (the URL, the file and key that said it)
    pub index: Option<(String, String)>,
    pub extra_indexes: Vec<(String, String)>,
    pub find_links: Vec<(String, String)>,
    /// pip's `cert`.
    pub cert: Option<(PathBuf, String)>,
}

/// Config files larger than this are not configuration.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = fs_err::File::open(path).ok()?;
    let mut s = String::new();
    f.take(MAX_CONFIG_BYTES).read_to_string(&mut s).ok()?;
    Some(s)
}

/// pip's files in its load order (later wins), then uv's, highest precedence first; a file
/// that is missing or unreadable says nothing.
pub fn read_files(pip_files: &[PathBuf], uv_files: &[PathBuf]) -> FileConfig {
    let mut pip = FileConfig::default();
    for f in pip_files {
        if let Some(text) = read_small(f) {
            pip_ini(&text, &f.display().to_string(), &mut pip);
        }
    }
    let mut uv = FileConfig::default();
    for f in uv_files.iter().rev() {
        if let Some(text) = read_small(f) {
            uv_toml(&text, &f.display().to_string(), &mut uv);
        }
    }
    // pip's files come before uv's.
    FileConfig {
        index: pip.index.or(uv.index),
        extra_indexes: if pip.extra_indexes.is_empty() {
            uv.extra_indexes
        } else {
            pip.extra_indexes
        },
        find_links: if pip.find_links.is_empty() {
            uv.find_links
        } else {
            pip.find_links
        },
        cert: pip.cert,
    }
}

/// One pip configuration file: sections `[global]` and `[install]` (in that order, the later
/// overriding), keys with `-` or `_`, values continued on indented lines.
pub fn pip_ini(text: &str, file: &str, out: &mut FileConfig) {
    let mut by_section: Vec<(String, String, String)> = Vec::new(); // (section, key, value)
    let mut section = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = by_section.last_mut() {
                last.2.push('\n');
                last.2.push_str(trimmed);
            }
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = name.trim().to_ascii_lowercase();
            continue;
        }
        if let Some((k, v)) = trimmed.split_once(['=', ':']) {
            let key = k.trim().to_ascii_lowercase().replace('_', "-");
            by_section.push((section.clone(), key, v.trim().to_string()));
        }
    }
    for wanted in ["global", "install"] {
        for (s, key, value) in by_section.iter().filter(|(s, ..)| s == wanted) {
            let said = format!("`{s}.{key}` in {file}");
            let words = || {
                value
                    .split_whitespace()
                    .map(|v| (v.to_string(), said.clone()))
                    .collect::<Vec<_>>()
            };
            match key.as_str() {
                "index-url" | "i" => out.index = Some((value.trim().to_string(), said.clone())),
                "extra-index-url" => out.extra_indexes = words(),
                "find-links" | "f" => out.find_links = words(),
                "cert" => out.cert = Some((PathBuf::from(value.trim()), said.clone())),
                _ => {}
            }
        }
    }
}

/// One `uv.toml`: `index-url`, `extra-index-url`, `find-links`, `[[index]]` tables (the one
/// with `default = true` is the index), at the top level or under `[pip]`. A file that does
/// not parse says nothing (uv itself would refuse to run).
pub fn uv_toml(text: &str, file: &str, out: &mut FileConfig) {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return;
    };
    let said = |k: &str| format!("`{k}` in {file}");
    let strings = |item: Option<&toml_edit::Item>| -> Vec<String> {
        item.and_then(|i| i.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for table in [
        Some(doc.as_table()),
        doc.get("pip").and_then(|p| p.as_table()),
    ]
    .into_iter()
    .flatten()
    {
        if let Some(u) = table.get("index-url").and_then(|v| v.as_str()) {
            out.index = Some((u.to_string(), said("index-url")));
        }
        let extra = strings(table.get("extra-index-url"));
        if !extra.is_empty() {
            out.extra_indexes = extra
                .into_iter()
                .map(|u| (u, said("extra-index-url")))
                .collect();
        }
        let links = strings(table.get("find-links"));
        if !links.is_empty() {
            out.find_links = links.into_iter().map(|u| (u, said("find-links"))).collect();
        }
    }
    if let Some(tables) = doc.get("index").and_then(|i| i.as_array_of_tables()) {
        for t in tables {
            let Some(url) = t.get("url").and_then(|v| v.as_str()) else {
                continue;
            };
            if t.get("default").and_then(|v| v.as_bool()) == Some(true) {
                out.index = Some((url.to_string(), said("[[index]]")));
            } else {
                out.extra_indexes.push((url.to_string(), said("[[index]]")));
            }
        }
    }
}

/// How long the host's Python may take to name pip's default index.
const ASK_PIP_TIMEOUT: Duration = Duration::from_secs(20);

/// pip's built-in default index, asked of the host's Python: its `PyPI.simple_url`, else the
/// `(default URL)` its `install --help` prints for `--index-url`.
pub fn pip_default_index(python: &Path) -> Result<String, String> {
    let direct = run(
        python,
        &[
            "-I",
            "-c",
            "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
        ],
    );
    if let Ok(out) = &direct {
        let url = out.trim();
        if url.starts_with("https://") || url.starts_with("http://") {
            return Ok(url.to_string());
        }
    }
    let help = run(python, &["-I", "-m", "pip", "install", "--help"])?;
    default_in_help(&help).ok_or_else(|| match direct {
        Err(e) => e,
        Ok(_) => format!(
            "`{} -m pip install --help` names no default index",
            python.display()
        ),
    })
}

/// The URL in `(default URL)` after `--index-url` in pip's help (wrapped over lines).
fn default_in_help(help: &str) -> Option<String> {
    let at = help.find("--index-url")?;
    let rest: String = help[at..].split_whitespace().collect::<Vec<_>>().join(" ");
    let start = rest.find("(default ")? + "(default ".len();
    let url = rest[start..].split([')', ' ']).next()?;
    (url.starts_with("https://") || url.starts_with("http://")).then(|| url.to_string())
}

/// Run `python args` with no input, a time limit and at most 1 MiB of output.
fn run(python: &Path, args: &[&str]) -> Result<String, String> {
    use std::io::Read;
    let shown = format!("{} {}", python.display(), args.join(" "));
    // An absolute path (the settings found it in `PATH`'s absolute directories), started from
    // an empty directory (with `-I`, nothing of the working directory is imported either).
    let iso = gpuimg_fetch::host_program::Isolated::new()
        .map_err(|e| format!("`{shown}`: no empty directory to start it from: {e}"))?;
    let mut child = iso
        .command(python)
        .ok_or_else(|| format!("`{}` is not an absolute path", python.display()))?
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("`{}`: {e}", python.display()))?;
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = stdout.as_mut() {
            let _ = o.take(1 << 20).read_to_string(&mut s);
        }
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let out = reader.join().unwrap_or_default();
                return if status.success() {
                    Ok(out)
                } else {
                    Err(format!("`{shown}` failed ({status})"))
                };
            }
            Ok(None) if start.elapsed() > ASK_PIP_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown}` did not answer within {} s",
                    ASK_PIP_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("`{shown}`: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_ini_global_then_install_with_continuations() {
        let mut c = FileConfig::default();
        pip_ini(
            "[global]\nindex-url = https://a/simple\ncert=/etc/ca.pem\nextra-index-url =\n    https://b/simple\n    https://c/simple\n# comment\n[install]\nindex_url: https://d/simple\n[other]\nindex-url = https://e\n",
            "/etc/pip.conf",
            &mut c,
        );
        assert_eq!(
            c.index,
            Some((
                "https://d/simple".into(),
                "`install.index-url` in /etc/pip.conf".into()
            ))
        );
        let extra: Vec<&str> = c.extra_indexes.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(extra, ["https://b/simple", "https://c/simple"]);
        assert_eq!(c.cert.map(|c| c.0), Some(PathBuf::from("/etc/ca.pem")));
    }

    #[test]
    fn uv_toml_keys_and_index_tables() {
        let mut c = FileConfig::default();
        uv_toml(
            "extra-index-url = [\"https://x/simple\"]\n[[index]]\nname = \"main\"\nurl = \"https://m/simple\"\ndefault = true\n[[index]]\nurl = \"https://y/simple\"\n",
            "uv.toml",
            &mut c,
        );
        assert_eq!(
            c.index.as_ref().map(|i| i.0.as_str()),
            Some("https://m/simple")
        );
        let extra: Vec<&str> = c.extra_indexes.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(extra, ["https://x/simple", "https://y/simple"]);
        let mut c = FileConfig::default();
        uv_toml(
            "[pip]\nindex-url = \"https://p/simple\"\n",
            "uv.toml",
            &mut c,
        );
        assert_eq!(c.index.map(|i| i.0), Some("https://p/simple".into()));
        let mut c = FileConfig::default();
        uv_toml("not = [toml", "uv.toml", &mut c);
        assert_eq!(c, FileConfig::default());
    }

    #[test]
    fn the_default_is_read_from_pips_help_text() {
        let help = "  -i, --index-url <url>       Base URL of the Python Package Index (default\n                              https://index.invalid/simple). This should point to a\n";
        assert_eq!(
            default_in_help(help).as_deref(),
            Some("https://index.invalid/simple")
        );
        assert_eq!(default_in_help("no such option"), None);
    }

    #[test]
    fn a_python_that_is_not_there_is_an_error_not_a_hang() {
        let e = pip_default_index(Path::new("/nonexistent/python3")).unwrap_err();
        assert!(e.contains("/nonexistent/python3"), "{e}");
    }
}
