//! `gpuimg cache verify [--repair]` and `gpuimg cache prune`: check every cache entry in full,
//! and remove the layer blobs no record references (and the downloads a policy names: the
//! prune command is `cache_prune.rs`).
//!
//! verify: every layer blob is hashed against its name, every layer record's claims (digest,
//! size, diff_id, uncompressed size) are checked by decompressing its blob, every download
//! (`debs-v1/`, `indexes-v1/`, `wheels-v1/`) and every pruned device-code copy
//! (`copies-v1/`: each record must name a blob that is there, hashed with the other blobs) is checked; stamps are ignored. Each bad entry is one line on stdout; exit 1
//! when any was bad, 0 when all were good. `--repair` also removes the bad entries (a later
//! build rebuilds or downloads them again) and re-stamps the good ones; the exit code still
//! says whether anything was bad. It runs beside builds, and reading a download for the check
//! is not a use of it (its access time, the last use `prune --older-than` reads, stays).
//! Both print what each bucket holds (entries and bytes) and take `--json` (one object on
//! stdout; the exit code is the same).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::cache_prune::{self, PruneArgs};
use crate::cli::{print_stdout, CliError, Settings};
use gpuimg_store::cache::{Bucket, Cache, Finding, Usage};

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
    /// Remove the layer blobs no layer record references, the pruned device-code copies and
    /// the downloads a policy names (--older-than, --max-size, --keep-locked), and print what
    /// was freed and what each bucket holds.
    Prune(PruneArgs),
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
        Command::Prune(args) => cache_prune::exec(args, settings),
    }
}

/// `Ok(false)`: there is no cache at `root` (nothing to do). A directory that is neither empty
/// nor tagged as a gpuimg cache is refused, so a mistyped `--cache` never gets cache
/// directories created in it.
pub(super) fn is_cache(root: &Path) -> Result<bool, CliError> {
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

pub(super) fn open_err(root: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
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
    let failed = |e: std::io::Error| {
        CliError::msg(
            2,
            format!("Failed to verify the cache `{}`: {e}", root.display()),
        )
    };
    let layers = gpuimg_store::cache::maintain::verify(&cache, &gpuimg_oci::layer::Records, repair)
        .map_err(failed)?;
    let usage = cache.usage().map_err(failed)?;
    let bad: Vec<Finding> = layers.bad;
    let code = if bad.is_empty() { 0 } else { 1 };
    if json {
        let mut v = verify_json(
            &bad,
            layers.blobs,
            layers.records,
            layers.downloads,
            layers.derived,
        );
        v["buckets"] = buckets_json(&usage, None);
        print_json(&v);
        return Ok(code);
    }
    let mut s = String::new();
    for f in &bad {
        let removed = if f.removed { " (removed)" } else { "" };
        s.push_str(&format!("bad: {}: {}{removed}\n", f.entry, f.problem));
    }
    if !settings.quiet {
        s.push_str(&bucket_table(&usage, None));
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
        "buckets": {},
    })
}

/// What each bucket holds, one line each under a header; with `after`, what it holds after
/// the prune (or would, in a dry run) beside it.
pub(super) fn bucket_table(
    before: &BTreeMap<Bucket, Usage>,
    after: Option<&BTreeMap<Bucket, Usage>>,
) -> String {
    let cell = |u: &Usage| format!("{}, {}", count(u.entries, "entry"), human(u.bytes));
    let s = match after {
        None => format!("{:<18} {:<31} entries, bytes", "bucket", "holds"),
        Some(_) => format!("{:<18} {:<31} {:<24} after", "bucket", "holds", "before"),
    };
    let mut s = vec![s.trim_end().to_string()];
    for (b, u) in before {
        let mut line = format!("{:<18} {:<31} {:<24}", b.dir(), b.holds(), cell(u));
        if let Some(a) = after.and_then(|a| a.get(b)) {
            line.push_str(&format!(" {}", cell(a)));
        }
        s.push(line.trim_end().to_string());
    }
    s.join("\n") + "\n"
}

/// `{"<bucket dir>": {"holds", "entries", "bytes"}}`, or with `after`,
/// `{"<bucket dir>": {"holds", "before": {"entries", "bytes"}, "after": {...}}}`.
pub(super) fn buckets_json(
    before: &BTreeMap<Bucket, Usage>,
    after: Option<&BTreeMap<Bucket, Usage>>,
) -> Value {
    let usage = |u: &Usage| json!({"entries": u.entries, "bytes": u.bytes});
    let mut m = serde_json::Map::new();
    for (b, u) in before {
        let v = match after {
            None => json!({"holds": b.holds(), "entries": u.entries, "bytes": u.bytes}),
            Some(a) => json!({
                "holds": b.holds(),
                "before": usage(u),
                "after": usage(&a.get(b).copied().unwrap_or_default()),
            }),
        };
        m.insert(b.dir().to_string(), v);
    }
    Value::Object(m)
}

pub(super) fn print_json(v: &Value) {
    print_stdout(&format!("{}\n", gpuimg_build::lock::canonical_json(v)));
}

pub(super) fn count(n: usize, what: &str) -> String {
    match (n, what.strip_suffix("ry")) {
        (1, _) => format!("1 {what}"),
        (_, Some(stem)) => format!("{n} {stem}ries"),
        _ => format!("{n} {what}s"),
    }
}

/// A byte count for people: bytes, kB, MB or GB (powers of ten, one decimal).
pub(super) fn human(b: u64) -> String {
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
        assert_eq!(super::count(0, "entry"), "0 entries");
    }
}
