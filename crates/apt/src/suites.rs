//! The suite names a profile's `suite:` is checked against when its repository has no such
//! suite: Debian's codenames and archive aliases (what Debian-style repositories publish as
//! `Suite:`/`Codename:` in their `Release` files), with the `-updates`/`-security`/
//! `-backports` suites of the recent releases, plus the suites the host's apt sources name.
//! A mirror's `dists/` listing is not a protocol, so it is never read. Must never fetch.

use std::path::Path;

use crate::hostconf::host_entries;
use crate::AptError;

/// Debian's release codenames, oldest first, and the archive's aliases for them.
const DEBIAN: &[&str] = &[
    "buzz",
    "rex",
    "bo",
    "hamm",
    "slink",
    "potato",
    "woody",
    "sarge",
    "etch",
    "lenny",
    "squeeze",
    "wheezy",
    "jessie",
    "stretch",
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "duke",
    "sid",
    "oldoldstable",
    "oldstable",
    "stable",
    "testing",
    "unstable",
    "experimental",
];

/// The releases whose suites have the point-release companions below.
const RECENT: &[&str] = &[
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "oldoldstable",
    "oldstable",
    "stable",
    "testing",
];

const COMPANIONS: &[&str] = &[
    "updates",
    "security",
    "backports",
    "proposed-updates",
    "backports-sloppy",
];

/// Where the names come from, as an error says it.
pub const KNOWN_SUITES: &str = "Debian's suite names and the host's apt sources";

/// Debian's suite names (codenames, aliases, the recent releases' companion suites).
fn debian_suites() -> impl Iterator<Item = String> {
    DEBIAN.iter().map(|s| s.to_string()).chain(
        RECENT
            .iter()
            .flat_map(|r| COMPANIONS.iter().map(move |c| format!("{r}-{c}"))),
    )
}

/// Up to three known suite names nearest to `suite` (a typo: at most two edits, or a third
/// of the name), nearest first, then by name: Debian's and those of the host's apt sources
/// (read from `apt_dir`; an unreadable configuration adds none).
pub fn nearest_suites(suite: &str, apt_dir: &Path) -> Vec<String> {
    let host = host_entries(apt_dir)
        .map(|es| es.into_iter().flat_map(|e| e.suites).collect::<Vec<_>>())
        .unwrap_or_default();
    let limit = 2.max(suite.len() / 3);
    let mut near: Vec<(usize, String)> = debian_suites()
        .chain(host)
        .filter(|c| c != suite && c.len().abs_diff(suite.len()) <= limit)
        .map(|c| (strsim::damerau_levenshtein(suite, &c), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    near.sort();
    near.dedup();
    near.into_iter().take(3).map(|(_, n)| n).collect()
}

/// `e` with the nearest known suite names filled in, where it is about a suite.
pub fn with_nearest(e: AptError, apt_dir: &Path) -> AptError {
    match e {
        AptError::UnknownSuite { suite, url, .. } => AptError::UnknownSuite {
            near: nearest_suites(&suite, apt_dir),
            suite,
            url,
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_codename_finds_the_release() {
        let none = Path::new("/nonexistent-apt-dir");
        assert_eq!(nearest_suites("bookwrom", none), ["bookworm"]);
        assert_eq!(
            nearest_suites("bookwrom-updates", none),
            ["bookworm-updates"]
        );
        assert_eq!(nearest_suites("stabel", none), ["stable"]);
        assert!(nearest_suites("xyzzy-quux", none).is_empty());
    }
}
