//! `gpuimg cache verify [--repair]` and `gpuimg cache prune`: check every cache entry in full,
//! and remove the layer blobs no record references.
//!
//! verify: every layer blob is hashed against its name, every layer record's claims (digest,
//! size, diff_id, uncompressed size) are checked by decompressing its blob, every download
//! (`debs-v1/`, `indexes-v1/`, `wheels-v1/`) and every pruned device-code copy
//! (`roots-v1/device-code-v1/`, against the sha256 beside it) is hashed; stamps are ignored. Each bad entry is one line on stdout; exit 1
//! when any was bad, 0 when all were good. `--repair` also removes the bad entries (a later
//! build rebuilds or downloads them again) and re-stamps the good ones; the exit code still
//! says whether anything was bad. It runs beside builds.
//! Both take `--json` (one object on stdout; the exit code is the same).
//! prune: takes the cache's exclusive lock, so it refuses (exit 2) while a build runs; also
//! removes the directories of earlier cache layouts (e.g. `apt-v1/`) and the pruned
//! device-code copies (derived data, made again by the next build that needs one).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::cache::{Cache, Finding};
use crate::cli::{print_stdout, CliError, Settings};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check every cache entry in full (blob digests, layer diff_ids, downloads); exit 1 if any is bad.
    Verify {
        /// Remove the bad entries (the next build rebuilds or downloads them).
        #[arg(long)]
        repair: bool,
        /// Print one JSON object: `ok`, `bad` (`entry`, `problem`, `removed`) and `checked`.
        #[arg(long)]
        json: bool,
        /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
        /// ~/.cache/gpuimg).
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
    },
    /// Remove the layer blobs no layer record references and the pruned device-code copies,
    /// and print what was freed.
    Prune {
        /// Print one JSON object: `removed` (`entry`, `size`, `linked`), `retired` and
        /// `derived` (`dir`, `size`), `hints`, `freed` and `kept`.
        #[arg(long)]
        json: bool,
        /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
        /// ~/.cache/gpuimg).
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
    },
}

pub fn exec(cmd: Command, settings: &Settings) -> Result<u8, CliError> {
    match cmd {
        Command::Verify {
            repair,
            json,
            cache,
        } => verify(
            &settings.cache_root(cache.as_deref()),
            repair,
            json,
            settings,
        ),
        Command::Prune { json, cache } => {
            prune(&settings.cache_root(cache.as_deref()), json, settings)
        }
    }
}

/// `Ok(false)`: there is no cache at `root` (nothing to do). A directory that is neither empty
/// nor tagged as a gpuimg cache is refused, so a mistyped `--cache` never gets cache
/// directories created in it.
fn is_cache(root: &Path) -> Result<bool, CliError> {
    match std::fs::read_dir(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CliError::msg(
            2,
            format!(
                "Failed to read the cache directory `{}`: {e}",
                root.display()
            ),
        )),
        Ok(mut entries) => {
            if root.join("CACHEDIR.TAG").is_file() {
                Ok(true)
            } else if entries.next().is_none() {
                Ok(false)
            } else {
                Err(CliError::msg(
                    2,
                    format!(
                        "`{}` is not a gpuimg cache (it has no CACHEDIR.TAG)",
                        root.display()
                    ),
                ))
            }
        }
    }
}

fn open_err(root: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| {
        CliError::msg(
            2,
            format!("Failed to open the cache `{}`: {e}", root.display()),
        )
    }
}

fn verify(root: &Path, repair: bool, json: bool, settings: &Settings) -> Result<u8, CliError> {
    if !is_cache(root)? {
        if json {
            print_json(&verify_json(&[], 0, 0, 0, 0));
        } else if !settings.quiet {
            eprintln!(
                "nothing to check: there is no cache at `{}`",
                root.display()
            );
        }
        return Ok(0);
    }
    let cache = Cache::open(root).map_err(open_err(root))?;
    let layers = crate::layer::verify(&cache, repair).map_err(|e| {
        CliError::msg(
            2,
            format!("Failed to verify the cache `{}`: {e}", root.display()),
        )
    })?;
    let bad: Vec<Finding> = layers.bad;
    let code = if bad.is_empty() { 0 } else { 1 };
    if json {
        print_json(&verify_json(
            &bad,
            layers.blobs,
            layers.records,
            layers.downloads,
            layers.derived,
        ));
        return Ok(code);
    }
    let mut s = String::new();
    for f in &bad {
        let removed = if f.removed { " (removed)" } else { "" };
        s.push_str(&format!("bad: {}: {}{removed}\n", f.entry, f.problem));
    }
    if !settings.quiet {
        s.push_str(&format!(
            "checked {}, {}, {}{}: {}\n",
            count(layers.blobs, "layer blob"),
            count(layers.records, "layer record"),
            match layers.derived {
                0 => String::new(),
                1 => "1 pruned device-code copy, ".into(),
                n => format!("{n} pruned device-code copies, "),
            },
            count(layers.downloads, "download"),
            match bad.len() {
                0 => "all good".to_string(),
                n => format!("{n} bad"),
            }
        ));
    }
    print_stdout(&s);
    Ok(code)
}

/// What `cache verify --json` prints.
fn verify_json(
    bad: &[Finding],
    blobs: usize,
    records: usize,
    downloads: usize,
    derived: usize,
) -> Value {
    let bad: Vec<Value> = bad
        .iter()
        .map(|f| json!({"entry": f.entry, "problem": f.problem, "removed": f.removed}))
        .collect();
    json!({
        "ok": bad.is_empty(),
        "bad": bad,
        "checked": {"layer_blobs": blobs, "layer_records": records, "downloads": downloads, "device_code_copies": derived},
    })
}

fn print_json(v: &Value) {
    print_stdout(&format!("{}\n", crate::lock::canonical_json(v)));
}

fn prune(root: &Path, json: bool, settings: &Settings) -> Result<u8, CliError> {
    if !is_cache(root)? {
        if json {
            print_json(
                &json!({"removed": [], "retired": [], "derived": [], "hints": 0, "freed": 0, "kept": 0}),
            );
        } else if !settings.quiet {
            eprintln!(
                "nothing to prune: there is no cache at `{}`",
                root.display()
            );
        }
        return Ok(0);
    }
    let cache = Cache::open_exclusive(root).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            CliError::msg(
                2,
                format!(
                    "The cache `{}` is in use by a running build",
                    root.display()
                ),
            )
            .with_hint("run `gpuimg cache prune` again when no build is using the cache")
        } else {
            open_err(root)(e)
        }
    })?;
    let p = crate::layer::prune(&cache).map_err(|e| {
        CliError::msg(
            2,
            format!("Failed to prune the cache `{}`: {e}", root.display()),
        )
    })?;
    if json {
        let removed: Vec<Value> = (p.removed.iter())
            .map(|(e, size, linked)| json!({"entry": e, "size": size, "linked": linked}))
            .collect();
        let retired: Vec<Value> = (p.retired.iter())
            .map(|(d, size)| json!({"dir": d, "size": size}))
            .collect();
        let derived: Vec<Value> = (p.derived.iter())
            .map(|(d, size)| json!({"dir": d, "size": size}))
            .collect();
        print_json(&json!({
            "removed": removed,
            "retired": retired,
            "derived": derived,
            "hints": p.hints,
            "freed": p.freed(),
            "kept": p.kept,
        }));
        return Ok(0);
    }
    if settings.quiet {
        return Ok(0);
    }
    let mut s = String::new();
    for (entry, size, linked) in &p.removed {
        let note = if *linked {
            ", still linked from an output"
        } else {
            ""
        };
        s.push_str(&format!("removed {entry} ({}{note})\n", human(*size)));
    }
    for (dir, size) in &p.retired {
        s.push_str(&format!(
            "removed {dir} (an earlier cache layout, {})\n",
            human(*size)
        ));
    }
    for (dir, size) in &p.derived {
        s.push_str(&format!(
            "removed {dir} (pruned device-code copies, made again when a build needs them, {})\n",
            human(*size)
        ));
    }
    if p.hints > 0 {
        s.push_str(&format!(
            "removed {} (the next push records again what it pushes)\n",
            count(p.hints, "push mount hint")
        ));
    }
    let held: u64 = p.removed.iter().filter(|r| r.2).map(|r| r.1).sum();
    s.push_str(&format!(
        "pruned {}: freed {}{}; kept {} referenced\n",
        count(p.removed.len(), "unreferenced blob"),
        human(p.freed()),
        if held > 0 {
            format!(
                " ({} more stays in use by outputs that hard-link it)",
                human(held)
            )
        } else {
            String::new()
        },
        count(p.kept, "blob"),
    ));
    print_stdout(&s);
    Ok(0)
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A byte count for people: bytes, kB, MB or GB (powers of ten, one decimal).
fn human(b: u64) -> String {
    match b {
        0..1_000 => format!("{b} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", b as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        _ => format!("{:.1} GB", b as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_and_counts_read_well() {
        assert_eq!(super::human(0), "0 bytes");
        assert_eq!(super::human(3000), "3.0 kB");
        assert_eq!(super::human(12_345_678), "12.3 MB");
        assert_eq!(super::human(4_200_000_000), "4.2 GB");
        assert_eq!(super::count(1, "blob"), "1 blob");
        assert_eq!(super::count(2, "blob"), "2 blobs");
    }
}
