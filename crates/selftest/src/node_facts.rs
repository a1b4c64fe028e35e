//! What the host checks read of a node (`gpuimg-selftest --host`), as plain data: each value
//! with the path it was read from, or why it could not be read.
//!
//! Filled by `node_read`, checked by `node_checks` (pure functions of these structs, so tests
//! feed them recorded facts). Nothing here reads anything.

use serde::{Deserialize, Serialize};

use super::data::ModuleInfo;

/// One fact read from the node: its value, or why there is none, and where it was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found<T> {
    /// The path read on this machine (the root joined with the node's path).
    pub from: String,
    pub value: Option<T>,
    /// Why there is no value: absent, unreadable, malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the path does not exist (as opposed to existing and unreadable or malformed).
    #[serde(default)]
    pub missing: bool,
}

impl<T> Found<T> {
    pub fn value(from: impl Into<String>, value: T) -> Found<T> {
        Found {
            from: from.into(),
            value: Some(value),
            error: None,
            missing: false,
        }
    }

    pub fn error(from: impl Into<String>, error: impl Into<String>, missing: bool) -> Found<T> {
        Found {
            from: from.into(),
            value: None,
            error: Some(error.into()),
            missing,
        }
    }
}

/// What a module file's appended signature names as its signer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedBy {
    /// The issuer's common name; `None` when named by subject key identifier.
    pub signer: Option<String>,
    /// The serial number (or subject key identifier), lower-case hex.
    pub key_id: String,
    /// Named by subject key identifier rather than issuer and serial.
    pub by_key_id: bool,
}

/// What the host checks read of one module file's `.modinfo` and signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleFile {
    pub vermagic: Option<String>,
    pub version: Option<String>,
    pub license: Option<String>,
    pub signed_by: Option<SignedBy>,
}

/// The certificate a signed node carries (`/var/lib/dkms/mok.pub`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateFacts {
    pub issuer: Option<String>,
    pub serial: String,
    pub subject_key_id: Option<String>,
}

/// The driver's user-space library as the loader would reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Library {
    /// The node's path of the real file behind `libcuda.so.1`.
    pub real: String,
    /// The version its name carries (`libcuda.so.535.309.01`), if it carries one.
    pub version: Option<String>,
}

/// Everything the host checks read of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    /// The running kernel's release (`/proc/sys/kernel/osrelease`, what `uname -r` prints).
    pub kernel: Found<String>,
    /// The kernel release the module files were looked up for: the running one, or the
    /// expected ABI when the running one is unknown.
    pub modules_for: String,
    /// Each expected module file (`/lib/modules/<release>/updates/dkms/<name>.ko`), in the
    /// expectation's order.
    pub modules: Vec<(String, Found<ModuleFile>)>,
    /// The loaded module's version (`/sys/module/nvidia/version`).
    pub loaded_version: Found<String>,
    /// The loaded module's version line (`/proc/driver/nvidia/version`): version and flavour.
    pub loaded: Found<ModuleInfo>,
    /// `libcuda.so.1` and the real file behind it.
    pub library: Found<Library>,
    /// The driver version whose GSP firmware was looked for (the module's, else the expected).
    pub firmware_version: String,
    /// The `gsp_*.bin` files (name, bytes) of `/lib/firmware/nvidia/<firmware_version>/`.
    pub firmware: Found<Vec<(String, u64)>>,
    /// The signing certificate, read only when the expectation names a signer.
    pub certificate: Option<Found<CertificateFacts>>,
}

impl NodeFacts {
    /// The loaded module's version and where it was read, if the module is loaded.
    pub fn loaded_version(&self) -> Option<(&str, &str)> {
        if let Some(v) = &self.loaded_version.value {
            return Some((v, &self.loaded_version.from));
        }
        self.loaded
            .value
            .as_ref()
            .map(|m| (m.version.as_str(), self.loaded.from.as_str()))
    }
}
