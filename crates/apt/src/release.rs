//! A repository's signed `Release` (from `InRelease`, or `Release` + `Release.gpg`) and the
//! package indexes it pins by sha256.
//!
//! Must never return an index entry from a release whose signature did not verify (unless the
//! repository is explicitly `trusted`).

use std::collections::BTreeMap;

use gpuimg_fetch::{Artifact, FetchError, Fetcher};
use gpuimg_store::digest::Digest;

use crate::control::paragraphs;
use crate::openpgp::Keyring;
use crate::repo::{Dist, Repo};
use crate::AptError;

/// The parts of a `Release` file gpuimg uses.
#[derive(Debug)]
pub struct Release {
    /// Path below the dist directory -> (sha256, size).
    pub files: BTreeMap<String, (Digest, u64)>,
    pub by_hash: bool,
}

/// Fetch and verify a repository's release. `warn` receives the `trusted: true` warning.
pub fn fetch_release(
    repo: &Repo,
    fetcher: &Fetcher,
    warn: &mut dyn FnMut(String),
) -> Result<Release, AptError> {
    let dist = repo.dist_url();
    let inrelease_url = format!("{dist}InRelease");
    let keyring = if repo.trusted {
        warn(format!(
            "Repository `{dist}` is marked `trusted: true`: its signature is not checked"
        ));
        None
    } else if repo.keys.is_empty() {
        return Err(AptError::NoKeyring { url: dist });
    } else {
        Some(Keyring::load(&repo.keys)?)
    };
    let inrelease = match fetcher.fetch_root(&inrelease_url) {
        Ok(v) => Ok(v),
        Err(e @ FetchError::Offline { .. }) => Err(e),
        Err(e) => return Err(e.into()),
    };
    let text = match (inrelease, &keyring) {
        (Ok(Some(bytes)), Some(k)) => {
            let text = String::from_utf8(bytes).map_err(|_| AptError::BadSignature {
                url: inrelease_url.clone(),
                keyring: k.label.clone(),
            })?;
            k.verify_inline(&text, &inrelease_url)?
        }
        (Ok(Some(bytes)), None) => strip_clearsign(&String::from_utf8_lossy(&bytes)),
        (first, _) => {
            let release_url = format!("{dist}Release");
            let release = match fetcher.fetch_root(&release_url) {
                Ok(Some(b)) => b,
                Ok(None) => {
                    first?;
                    // A suite the repository does not have: bad input, named with the
                    // nearest known suites by the caller (`suites::with_nearest`).
                    return Err(match &repo.dist {
                        Dist::Suite(suite) => AptError::UnknownSuite {
                            suite: suite.clone(),
                            url: repo.base.clone(),
                            near: Vec::new(),
                        },
                        Dist::Flat(_) => AptError::NoRelease { url: dist },
                    });
                }
                Err(e) => {
                    first?;
                    return Err(e.into());
                }
            };
            if let Some(k) = &keyring {
                let sig_url = format!("{dist}Release.gpg");
                let Some(sig) = fetcher.fetch_root(&sig_url)? else {
                    return Err(AptError::Unsigned { url: dist });
                };
                k.verify_detached(&release, &sig, &release_url)?;
            }
            String::from_utf8_lossy(&release).into_owned()
        }
    };
    parse_release(&text, &dist)
}

/// The body of a cleartext-signed message, for `trusted` repositories only.
pub fn strip_clearsign(text: &str) -> String {
    let Some(start) = text.find("\n\n").filter(|_| text.starts_with("-----BEGIN")) else {
        return text.to_string();
    };
    let body = &text[start + 2..];
    let end = body
        .find("\n-----BEGIN PGP SIGNATURE")
        .unwrap_or(body.len());
    body[..end]
        .lines()
        .map(|l| l.strip_prefix("- ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn parse_release(text: &str, url: &str) -> Result<Release, AptError> {
    let bad = |message: String| AptError::InvalidRelease {
        url: url.to_string(),
        message,
    };
    let para = paragraphs(text)
        .next()
        .ok_or_else(|| bad("empty".into()))?
        .map_err(|line| bad(format!("line {line} is not a field")))?;
    let sums = para
        .get("SHA256")
        .ok_or_else(|| bad("no `SHA256` field".into()))?;
    let mut files = BTreeMap::new();
    for line in sums.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut w = line.split_whitespace();
        let (Some(h), Some(size), Some(name)) = (w.next(), w.next(), w.next()) else {
            return Err(bad(format!("bad `SHA256` line `{line}`")));
        };
        let digest = Digest::from_hex(h).map_err(|e| bad(e.to_string()))?;
        let size = size
            .parse::<u64>()
            .map_err(|_| bad(format!("bad size in `{line}`")))?;
        files.insert(name.to_string(), (digest, size));
    }
    Ok(Release {
        files,
        by_hash: para
            .get("Acquire-By-Hash")
            .is_some_and(|v| v.eq_ignore_ascii_case("yes")),
    })
}

/// One package index to fetch: where, and how it is compressed.
#[derive(Debug, Clone)]
pub struct IndexFile {
    pub artifact: Artifact,
    pub path: String,
    /// The uncompressed index's sha256 and size as the Release gives them (to cache the
    /// decompressed text, and to bound its decompression).
    pub plain: Option<(Digest, u64)>,
}

/// The `Packages` index of each component for `arch`, preferring xz, then gz, then plain.
pub fn index_files(repo: &Repo, rel: &Release, arch: &str) -> Result<Vec<IndexFile>, AptError> {
    let dist = repo.dist_url();
    let dirs: Vec<(String, String)> = match &repo.dist {
        Dist::Suite(_) => repo
            .components
            .iter()
            .map(|c| (c.clone(), format!("{c}/binary-{arch}/")))
            .collect(),
        Dist::Flat(_) => vec![(String::new(), String::new())],
    };
    let mut out = Vec::new();
    for (component, dir) in dirs {
        let found = ["Packages.xz", "Packages.gz", "Packages"]
            .iter()
            .find_map(|f| {
                let path = format!("{dir}{f}");
                rel.files.get(&path).map(|&(d, s)| (path, d, s))
            });
        let Some((path, sha256, size)) = found else {
            return Err(AptError::NoIndex {
                url: dist,
                component,
                arch: arch.to_string(),
            });
        };
        let url = if rel.by_hash {
            format!("{dist}{dir}by-hash/SHA256/{}", sha256.hex())
        } else {
            format!("{dist}{path}")
        };
        out.push(IndexFile {
            artifact: Artifact {
                url,
                sha256,
                size,
                bucket: gpuimg_store::cache::Bucket::Indexes,
            },
            plain: rel.files.get(&format!("{dir}Packages")).copied(),
            path,
        });
    }
    Ok(out)
}
