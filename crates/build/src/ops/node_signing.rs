//! The node's built modules signed with the user's key (`host.signing`), as dkms would sign them:
//! the kernel's own `scripts/sign-file` (from the build root's headers) run in `gpuimg-sandbox`
//! with the modules read-only, a copy of the key and the certificate read-only, and one
//! output; then every signed module read back (`gpuimg-kmod`) and held to the kernel again and to
//! the certificate (its signature must name it). `sign-file` writes no signing time, so the same
//! modules and key give the same bytes. Must never copy the key anywhere but the one private
//! staging directory it is read from (removed when signing ends), nor into the cache, the
//! image or a log.

use std::ffi::OsString;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::node_module::{BuiltModules, ModuleError};

/// What a signed node records of its signer.
#[derive(Debug, Clone)]
pub struct Signer {
    pub certificate: gpuimg_kmod::Certificate,
    /// The sha256 of the certificate's DER bytes, lower-case hex.
    pub fingerprint: String,
}

impl Signer {
    /// How the image's label names the signer: the certificate's subject, serial and
    /// fingerprint.
    pub fn label(&self) -> String {
        format!(
            "{} (serial {}, sha256 {})",
            self.certificate
                .subject
                .as_deref()
                .unwrap_or("a certificate without a common name"),
            self.certificate.serial,
            self.fingerprint
        )
    }
}

/// The most bytes of a key or certificate file read.
const MAX_KEY_BYTES: u64 = 1 << 20;

/// Read the certificate at `path` (PEM or DER).
pub fn signer(path: &Path) -> Result<Signer, ModuleError> {
    let bytes = read_small(path)?;
    let certificate = gpuimg_kmod::Certificate::parse(&bytes)
        .map_err(|e| ModuleError::Signing(format!("`{}` is {e}", path.display())))?;
    let fingerprint = gpuimg_store::digest::Digest::of(&certificate.der).hex();
    Ok(Signer {
        certificate,
        fingerprint,
    })
}

/// Sign `built` (built for the kernel `abi` in the build root `root`) with the key at `key`
/// and the certificate `signer` was read from (`cert`), into `work/signed`; returns the signed
/// modules, checked.
pub fn sign(
    root: &Path,
    built: &BuiltModules,
    abi: &str,
    key: &Path,
    cert: &Path,
    signer: &Signer,
    work: &Path,
) -> Result<BuiltModules, ModuleError> {
    super::node_module::plain_release(abi)?;
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ModuleError::Read {
            path: path.clone(),
            source,
        }
    };
    let tool = format!("/usr/src/linux-headers-{abi}/scripts/sign-file");
    if fs_err::metadata(root.join(tool.trim_start_matches('/'))).is_err() {
        return Err(ModuleError::Signing(format!(
            "the kernel's headers have no `{tool}`"
        )));
    }
    // The key and the certificate, copied into a directory of the private scratch (which no one
    // else on the host reaches), readable by the sandbox's user alone, bound read-only.
    let keys = work.join("signing-keys");
    fs_err::create_dir(&keys).map_err(io(&keys))?;
    fs_err::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).map_err(io(&keys))?;
    let result = (|| {
        for (from, name) in [(key, "key"), (cert, "certificate")] {
            let to = keys.join(name);
            let bytes = read_small(from)?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&to)
                .map_err(io(&to))?;
            std::io::Write::write_all(&mut f, &bytes).map_err(io(&to))?;
            give_to_sandbox(&to, 0o400)?;
        }
        give_to_sandbox(&keys, 0o500)?;
        run_sign_file(root, built, abi, &tool, &keys, work)
    })();
    let removed = fs_err::remove_dir_all(&keys).map_err(io(&keys));
    let signed = result?;
    removed?;
    for f in &signed.facts {
        match &f.signature {
            Some(sig) if signer.certificate.signed(sig) => {}
            Some(sig) => {
                return Err(ModuleError::Signing(format!(
                    "{} is signed by {} ({}), not by the certificate given",
                    f.file,
                    sig.signer.as_deref().unwrap_or("a key id"),
                    sig.key_id
                )))
            }
            None => {
                return Err(ModuleError::Signing(format!(
                    "{} carries no signature after signing",
                    f.file
                )))
            }
        }
    }
    Ok(signed)
}

/// `sign-file sha256 KEY CERT MODULE OUT` for every module, in the sandbox.
fn run_sign_file(
    root: &Path,
    built: &BuiltModules,
    abi: &str,
    tool: &str,
    keys: &Path,
    work: &Path,
) -> Result<BuiltModules, ModuleError> {
    let out = work.join("signed");
    let log = work.join("sign.log");
    let mut script = String::from("set -e; ");
    for f in &built.facts {
        // File names come from the build's own output, checked before they reach the script.
        let plain = f.file.strip_suffix(".ko").is_some_and(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
        if !plain {
            return Err(ModuleError::Signing(format!(
                "a built module named `{}`",
                f.file
            )));
        }
        script.push_str(&format!(
            "{tool} sha256 /keys/key /keys/certificate /modules/{0} /out/{0}; ",
            f.file
        ));
    }
    for d in ["modules", "keys", "out"] {
        let p = root.join(d);
        fs_err::create_dir_all(&p).map_err(|source| ModuleError::Read {
            path: p.display().to_string(),
            source,
        })?;
    }
    let env = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    let spec = gpuimg_sandbox::Spec {
        root: root.to_path_buf(),
        binds: vec![
            gpuimg_sandbox::Bind {
                host: built.dir.clone(),
                inside: "/modules".into(),
            },
            gpuimg_sandbox::Bind {
                host: keys.to_path_buf(),
                inside: "/keys".into(),
            },
        ],
        scratch: vec![],
        output: gpuimg_sandbox::Output {
            host: out.clone(),
            inside: "/out".into(),
            max_bytes: 2 << 30,
        },
        workdir: "/out".into(),
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![
            env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            env("LC_ALL", "C"),
        ],
        time_limit: Duration::from_secs(600),
        log: gpuimg_sandbox::Log {
            path: log.clone(),
            max_bytes: 1 << 20,
            tail_lines: 20,
        },
    };
    gpuimg_sandbox::run(&spec)?;
    let symvers = root.join(format!("usr/src/linux-headers-{abi}/Module.symvers"));
    let facts = super::node_module::check(&out, &symvers, abi)?;
    Ok(BuiltModules {
        dir: out,
        facts,
        log,
        installed_as: built.installed_as.clone(),
    })
}

/// Make `path` the sandbox's user's (the one its commands run as), with `mode`.
fn give_to_sandbox(path: &Path, mode: u32) -> Result<(), ModuleError> {
    let io = |source| ModuleError::Read {
        path: path.display().to_string(),
        source,
    };
    let id = gpuimg_sandbox::SANDBOX_ID;
    std::os::unix::fs::chown(path, Some(id), Some(id)).map_err(io)?;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)
}

fn read_small(path: &Path) -> Result<Vec<u8>, ModuleError> {
    let io = |source| ModuleError::Read {
        path: path.display().to_string(),
        source,
    };
    let f = fs_err::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_KEY_BYTES + 1), &mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_KEY_BYTES {
        return Err(ModuleError::Signing(format!(
            "`{}` is larger than a key or certificate ({MAX_KEY_BYTES} bytes)",
            path.display()
        )));
    }
    Ok(bytes)
}
