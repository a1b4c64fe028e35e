//! Which certificate authorities HTTPS downloads trust: the host's, like its own tools.
//!
//! The system trust store (the first CA bundle of [`SYSTEM_BUNDLES`] that exists, as OpenSSL
//! and Debian's `ca-certificates` lay it out) plus what the settings phase hands in: bundles
//! (`SSL_CERT_FILE`, pip's `cert`) and directories of certificates (`SSL_CERT_DIR`). Only when
//! none of these gives a certificate are the roots bundled with gpuimg used, so a host behind a
//! TLS-inspecting proxy whose CA is in its store works as `curl` and `pip` do.
//! Must never read the environment (the settings phase does) and never turn verification off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ureq::tls::{Certificate, PemItem, RootCerts};

use super::FetchError;

/// Where distributions keep the system's CA bundle (the list OpenSSL's probes use on Linux).
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Certificates a single source may hold (a bundle or a directory), and the bytes one file
/// may have: a larger one is not a CA bundle.
const MAX_CERTS: usize = 10_000;
const MAX_FILE_BYTES: u64 = 16 << 20;

/// One extra source of trusted certificates, with the setting that named it (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustSource {
    /// `SSL_CERT_FILE`, `pip's cert`, ...
    pub setting: String,
    pub path: PathBuf,
}

/// The certificate authorities to trust: the system store plus these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
    /// PEM bundles.
    pub files: Vec<TrustSource>,
    /// Directories of PEM files (every regular file in them is read).
    pub dirs: Vec<TrustSource>,
    /// Skip the system store (tests that pin exactly what is trusted).
    pub no_system: bool,
}

impl Trust {
    /// This trust plus `other`'s extra sources.
    pub fn with(&self, other: &Trust) -> Trust {
        let mut t = self.clone();
        t.files.extend(other.files.iter().cloned());
        t.dirs.extend(other.dirs.iter().cloned());
        t.no_system |= other.no_system;
        t
    }

    /// The root certificates for ureq: every certificate found, or the bundled web roots when
    /// none was.
    pub fn root_certs(&self) -> Result<RootCerts, FetchError> {
        let mut certs: Vec<Certificate<'static>> = Vec::new();
        if !self.no_system {
            if let Some(p) = SYSTEM_BUNDLES.iter().map(Path::new).find(|p| p.is_file()) {
                certs.extend(read_bundle(p, "the system trust store")?);
            }
        }
        for s in &self.files {
            certs.extend(read_bundle(&s.path, &s.setting)?);
        }
        for s in &self.dirs {
            certs.extend(read_dir(&s.path, &s.setting)?);
        }
        if certs.is_empty() {
            return Ok(RootCerts::WebPki);
        }
        certs.sort_by(|a, b| a.der().cmp(b.der()));
        certs.dedup_by(|a, b| a.der() == b.der());
        Ok(RootCerts::Specific(Arc::new(certs)))
    }
}

fn bad(setting: &str, path: &Path, message: String) -> FetchError {
    FetchError::Trust {
        setting: setting.to_string(),
        path: path.to_path_buf(),
        message,
    }
}

/// The certificates of one PEM file (other PEM items, such as keys, are skipped).
fn read_bundle(path: &Path, setting: &str) -> Result<Vec<Certificate<'static>>, FetchError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs_err::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| bad(setting, path, e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(
            setting,
            path,
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    let mut out = Vec::new();
    for item in ureq::tls::parse_pem(&bytes) {
        match item {
            Ok(PemItem::Certificate(c)) => out.push(c),
            Ok(_) => {}
            Err(e) => return Err(bad(setting, path, e.to_string())),
        }
        if out.len() > MAX_CERTS {
            return Err(bad(
                setting,
                path,
                format!("more than {MAX_CERTS} certificates"),
            ));
        }
    }
    Ok(out)
}

/// The certificates of every regular file in `dir` (symlinks followed, as OpenSSL's hashed
/// directories are links); files that are not PEM are skipped.
fn read_dir(dir: &Path, setting: &str) -> Result<Vec<Certificate<'static>>, FetchError> {
    let entries = fs_err::read_dir(dir).map_err(|e| bad(setting, dir, e.to_string()))?;
    let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    names.sort();
    let mut out = Vec::new();
    for p in names {
        if !p.is_file() {
            continue;
        }
        if let Ok(certs) = read_bundle(&p, setting) {
            out.extend(certs);
        }
        if out.len() > MAX_CERTS {
            return Err(bad(
                setting,
                dir,
                format!("more than {MAX_CERTS} certificates"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_file_that_is_missing_is_an_error_naming_the_setting() {
        let t = Trust {
            files: vec![TrustSource {
                setting: "SSL_CERT_FILE".into(),
                path: "/nonexistent/ca.pem".into(),
            }],
            dirs: vec![],
            no_system: true,
        };
        let e = t.root_certs().unwrap_err().to_string();
        assert!(
            e.contains("SSL_CERT_FILE") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
    }

    #[test]
    fn nothing_found_falls_back_to_the_bundled_roots() {
        let t = Trust {
            no_system: true,
            ..Trust::default()
        };
        assert!(matches!(t.root_certs().unwrap(), RootCerts::WebPki));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a certificate").unwrap();
        let t = Trust {
            dirs: vec![TrustSource {
                setting: "SSL_CERT_DIR".into(),
                path: dir.path().to_path_buf(),
            }],
            no_system: true,
            ..Trust::default()
        };
        assert!(matches!(t.root_certs().unwrap(), RootCerts::WebPki));
    }
}
