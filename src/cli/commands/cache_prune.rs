//! `gpuimg cache prune [--older-than DURATION] [--max-size SIZE] [--keep-locked LOCK...]
//! [--dry-run] [--json]`: remove what nothing references, and the downloads a policy names.
//!
//! Always: the layer blobs no layer record references, the directories of earlier cache
//! layouts (e.g. `apt-v1/`), the pruned device-code copies and the push mount hints
//! (`cache::maintain::prune`). Downloads (`debs-v1`, `indexes-v1`, `wheels-v1`) only by a policy
//! (`cache::DownloadPolicy`): `--older-than` those not used for longer (last use: the later
//! of access and modification time, see `src/cache/downloads.rs`), `--max-size` the least
//! recently used until the downloads' total is at most SIZE, `--keep-locked` every one the
//! given locks do not pin (a lock pins debs and wheels, never an index; a pinned one stays
//! whatever the other policies say). The locks are all read before anything is removed: a
//! lock that cannot be read is bad input (exit 2) and nothing is removed.
//! Takes the cache's exclusive lock, so it refuses (exit 2) while a build runs; `--dry-run`
//! removes nothing, takes the shared lock (it runs beside builds) and says "would remove".
//! Prints each removal, then what each bucket holds before and after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::cache::{bucket_table, buckets_json, count, human, is_cache, open_err, print_json};
use crate::cli::{print_stdout, CliError, Settings};
use gpuimg_store::byte_size::ByteSize;
use gpuimg_store::cache::{Bucket, Cache, Download, DownloadPolicy, Pinned, Usage, Why};

#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Also remove the downloads not used for longer than DURATION (`30d`, `12h`, `2w`; units
    /// s, m, h, d, w).
    #[arg(long, value_name = "DURATION")]
    older_than: Option<Age>,
    /// Also remove the least recently used downloads until the downloads' total is at most SIZE
    /// (`5GB`, `500MiB`).
    #[arg(long, value_name = "SIZE")]
    max_size: Option<ByteSize>,
    /// Keep only the downloads these locks pin (repeatable): every other download is removed,
    /// and a pinned one stays whatever --older-than and --max-size say.
    #[arg(long, value_name = "LOCK", num_args = 1..)]
    keep_locked: Vec<PathBuf>,
    /// Remove nothing: list what would go and what each bucket would hold.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object: `removed` (`entry`, `size`, `linked`), `retired` and
    /// `derived` (`dir`, `size`), `hints`, `downloads` (`entry`, `size`, `linked`,
    /// `last_used`, `why`), `buckets` (`holds`, `before`, `after`), `dry_run`, `freed` and
    /// `kept`.
    #[arg(long)]
    json: bool,
    /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
    /// ~/.cache/gpuimg).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
}

/// A length of time as a user writes it: a whole number and a unit (`30d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Age(pub Duration);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "Invalid duration `{0}`: expected a whole number with a unit (s, m, h, d, w), e.g. `30d` or \
     `12h`"
)]
pub struct AgeError(String);

impl std::str::FromStr for Age {
    type Err = AgeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || AgeError(s.to_string());
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (n, unit) = t.split_at(split);
        let n: u64 = n.parse().map_err(|_| bad())?;
        let scale = match unit.trim() {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(bad()),
        };
        n.checked_mul(scale)
            .map(|secs| Age(Duration::from_secs(secs)))
            .ok_or_else(bad)
    }
}

pub fn exec(args: PruneArgs, settings: &Settings) -> Result<u8, CliError> {
    let root = settings.cache_root(args.cache.as_deref());
    // Every lock is read before anything is touched.
    let keep_only = match args.keep_locked.as_slice() {
        [] => None,
        locks => Some(pinned(locks)?),
    };
    let policy = DownloadPolicy {
        older_than: args.older_than.map(|a| a.0),
        max_size: args.max_size.map(|s| s.0),
        keep_only,
    };
    if !is_cache(&root)? {
        if args.json {
            print_json(&json!({
                "removed": [], "retired": [], "derived": [], "hints": 0, "downloads": [],
                "buckets": {}, "dry_run": args.dry_run, "freed": 0, "kept": 0,
            }));
        } else if !settings.quiet {
            eprintln!(
                "nothing to prune: there is no cache at `{}`",
                root.display()
            );
        }
        return Ok(0);
    }
    let cache = open(&root, args.dry_run)?;
    let failed = |e: std::io::Error| {
        CliError::msg(
            2,
            format!("Failed to prune the cache `{}`: {e}", root.display()),
        )
    };
    let before = cache.usage().map_err(failed)?;
    let mut p =
        gpuimg_store::cache::maintain::prune(&cache, &gpuimg_oci::layer::Records, args.dry_run)
            .map_err(failed)?;
    let downloads = cache.downloads().map_err(failed)?;
    let now = SystemTime::now();
    let doomed = policy.choose(&downloads, now);
    for (d, _) in &doomed {
        p.gone.entry(d.bucket).or_default().add(d.size);
        if let Some(g) = d.digest() {
            if let Ok(m) = std::fs::symlink_metadata(cache.stamp_path(d.bucket, &g)) {
                p.gone.entry(Bucket::Trust).or_default().add(m.len());
            }
        }
        if !args.dry_run {
            cache.remove_download(d).map_err(failed)?;
        }
    }
    let after: BTreeMap<Bucket, Usage> = if args.dry_run {
        (before.iter())
            .map(|(b, u)| (*b, u.less(p.gone.get(b).copied().unwrap_or_default())))
            .collect()
    } else {
        cache.usage().map_err(failed)?
    };
    let dl_freed: u64 = (doomed.iter())
        .filter(|(d, _)| !d.linked)
        .map(|(d, _)| d.size)
        .sum();
    if args.json {
        let removed: Vec<Value> = (p.removed.iter())
            .map(|(e, size, linked)| json!({"entry": e, "size": size, "linked": linked}))
            .collect();
        let dirs = |v: &[(String, u64)]| -> Vec<Value> {
            v.iter()
                .map(|(d, size)| json!({"dir": d, "size": size}))
                .collect()
        };
        let gone: Vec<Value> = (doomed.iter())
            .map(|(d, why)| {
                json!({
                    "entry": d.entry(),
                    "size": d.size,
                    "linked": d.linked,
                    "last_used": unix_secs(d.last_use),
                    "why": why_word(why),
                })
            })
            .collect();
        print_json(&json!({
            "removed": removed,
            "retired": dirs(&p.retired),
            "derived": dirs(&p.derived),
            "hints": p.hints,
            "downloads": gone,
            "buckets": buckets_json(&before, Some(&after)),
            "dry_run": args.dry_run,
            "freed": p.freed() + dl_freed,
            "kept": p.kept,
        }));
        return Ok(0);
    }
    if settings.quiet {
        return Ok(0);
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let linked_note = |linked: bool| match linked {
        true => ", still linked from an output",
        false => "",
    };
    let mut s = String::new();
    for (entry, size, linked) in &p.removed {
        let note = linked_note(*linked);
        s.push_str(&format!("{verb} {entry} ({}{note})\n", human(*size)));
    }
    for (dir, size) in &p.retired {
        s.push_str(&format!(
            "{verb} {dir} (an earlier cache layout, {})\n",
            human(*size)
        ));
    }
    for (dir, size) in &p.derived {
        s.push_str(&format!(
            "{verb} {dir} (pruned device-code copies, made again when a build needs them, {})\n",
            human(*size)
        ));
    }
    if p.hints > 0 {
        s.push_str(&format!(
            "{verb} {} (the next push records again what it pushes)\n",
            count(p.hints, "push mount hint")
        ));
    }
    for (d, why) in &doomed {
        s.push_str(&format!(
            "{verb} {} ({}, {}{})\n",
            d.entry(),
            human(d.size),
            why_text(why),
            linked_note(d.linked)
        ));
    }
    let (pruned, free) = match args.dry_run {
        true => ("would prune", "would free"),
        false => ("pruned", "freed"),
    };
    let held: u64 = p.removed.iter().filter(|r| r.2).map(|r| r.1).sum();
    s.push_str(&format!(
        "{pruned} {}: {free} {}{}; kept {} referenced\n",
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
    if !policy.is_empty() {
        let left: Vec<&Download> = (downloads.iter())
            .filter(|d| !doomed.iter().any(|(g, _)| g == *d))
            .collect();
        s.push_str(&format!(
            "{pruned} {}: {free} {}; kept {} ({})\n",
            count(doomed.len(), "download"),
            human(dl_freed),
            count(left.len(), "download"),
            human(left.iter().map(|d| d.size).sum()),
        ));
    } else {
        s.push_str(
            "downloads are kept (remove some with --older-than, --max-size or --keep-locked)\n",
        );
    }
    s.push_str(&bucket_table(&before, Some(&after)));
    print_stdout(&s);
    Ok(0)
}

/// The sha256 of every deb and wheel the locks at `paths` pin.
fn pinned(paths: &[PathBuf]) -> Result<Pinned, CliError> {
    let mut out = Pinned::new();
    for path in paths {
        let lock = gpuimg_build::lock::read(path).map_err(|e| CliError::bad_input(&e))?;
        out.extend(lock.debs().map(|p| p.sha256));
        out.extend(lock.wheels().map(|w| w.sha256));
    }
    Ok(out)
}

/// The cache, locked exclusively (refused while a build runs) or, for a dry run, shared.
fn open(root: &Path, dry_run: bool) -> Result<Cache, CliError> {
    if dry_run {
        return Cache::open(root).map_err(open_err(root));
    }
    Cache::open_exclusive(root).map_err(|e| {
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
    })
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn why_word(why: &Why) -> &'static str {
    match why {
        Why::Unpinned => "unpinned",
        Why::Unused(_) => "unused",
        Why::OverSize => "over_size",
    }
}

fn why_text(why: &Why) -> String {
    match why {
        Why::Unpinned => "a download no given lock pins".to_string(),
        Why::Unused(age) => match age.as_secs() / 86_400 {
            1 => "a download last used 1 day ago".to_string(),
            n if n > 1 => format!("a download last used {n} days ago"),
            _ => format!("a download last used {} hours ago", age.as_secs() / 3600),
        },
        Why::OverSize => "a least recently used download past --max-size".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        let d = |s: &str| s.parse::<Age>().map(|a| a.0.as_secs());
        assert_eq!(d("30d"), Ok(30 * 86_400));
        assert_eq!(d("12h"), Ok(12 * 3600));
        assert_eq!(d("2w"), Ok(14 * 86_400));
        assert_eq!(d("90m"), Ok(5400));
        assert_eq!(d("0s"), Ok(0));
        for bad in ["", "30", "d", "30x", "-1d", "1.5d", "99999999999999999999w"] {
            let e = bad.parse::<Age>().unwrap_err();
            assert!(
                e.to_string().starts_with("Invalid duration `"),
                "{bad}: {e}"
            );
        }
    }
}
