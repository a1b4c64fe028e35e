//! The `node` section of an expectation: what a node image (a `kind: host` profile) was built
//! with, for the self-test's host checks (`gpuimg-selftest --host`): the kernel ABI, the driver
//! version its module and user space are at, the module flavour, the module files under
//! `/lib/modules/<abi>/updates/dkms/` and, when the modules are signed, the certificate that
//! signed them.
//!
//! Plain data with its own validation; optional in the file, so an expectation without it (every
//! container image's) reads as before. Never probes anything.

use serde::{Deserialize, Serialize};

use super::expectation::ExpectError;
use super::settings::KernelModule;

/// What a node was built with (the build's resolution and its signing certificate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeExpectation {
    /// The kernel's ABI (`uname -r` of the kernel the image carries: `6.1.0-28-cloud-amd64`).
    pub kernel_abi: String,
    /// The driver's exact upstream version (`535.309.01`): the module's `version`, the name of
    /// the user-space `libcuda.so.<version>` and the GSP firmware's directory.
    pub driver: String,
    /// `open` or `proprietary` (never `any`: a node carries one).
    pub flavour: KernelModule,
    /// The module files' names without `.ko` under `/lib/modules/<abi>/updates/dkms/`
    /// (`nvidia-current`, `nvidia-current-uvm`…); the first is the core module, the one
    /// `modprobe nvidia` loads, whose `license` tells the flavour.
    pub modules: Vec<String>,
    /// The certificate the modules are signed with; absent when they are not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<NodeSigner>,
}

/// How a module signature names the certificate that made it, as the certificate says it: a
/// signature by issuer and serial (what the kernel's `sign-file` writes) matches `issuer` and
/// `serial`; one by subject key identifier matches `subject_key_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSigner {
    /// The issuer's common name (`modinfo`'s `signer`); absent when the certificate's issuer
    /// has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The serial number, lower-case hex as its DER integer holds it (`modinfo`'s `sig_key`,
    /// without the colons).
    pub serial: String,
    /// The subject key identifier, lower-case hex, if the certificate has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_key_id: Option<String>,
}

impl NodeSigner {
    /// `issuer (serial …)`, as reports name the certificate.
    pub fn describe(&self) -> String {
        format!(
            "{} (serial {})",
            self.issuer
                .as_deref()
                .unwrap_or("an issuer without a common name"),
            self.serial
        )
    }
}

fn bad(field: &'static str, value: &str) -> ExpectError {
    ExpectError::Value {
        field,
        value: value.to_string(),
    }
}

/// A kernel release or module name that is one plain path component.
fn plain_component(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-~".contains(&b))
}

fn lower_hex(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl NodeExpectation {
    /// Refuse what the host checks could not use: a kernel ABI or module name that is not one
    /// path component, a driver that is not a dotted version, the flavour `any`, no module, a
    /// serial or key id that is not lower-case hex.
    pub fn validate(&self) -> Result<(), ExpectError> {
        if !plain_component(&self.kernel_abi) {
            return Err(bad("node.kernel_abi", &self.kernel_abi));
        }
        let version = !self.driver.is_empty()
            && self
                .driver
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !version {
            return Err(bad("node.driver", &self.driver));
        }
        if self.flavour == KernelModule::Any {
            return Err(bad("node.flavour", "any"));
        }
        if self.modules.is_empty() {
            return Err(bad("node.modules", ""));
        }
        for m in &self.modules {
            if !plain_component(m) || m.ends_with(".ko") {
                return Err(bad("node.modules", m));
            }
        }
        if let Some(s) = &self.signer {
            if !lower_hex(&s.serial) {
                return Err(bad("node.signer.serial", &s.serial));
            }
            if let Some(k) = s.subject_key_id.as_deref().filter(|k| !lower_hex(k)) {
                return Err(bad("node.signer.subject_key_id", k));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::Expectation;

    const NODE: &str = r#"{"format": 2, "node": {"kernel_abi": "6.1.0-28-cloud-amd64",
        "driver": "535.309.01", "flavour": "proprietary",
        "modules": ["nvidia-current", "nvidia-current-uvm"],
        "signer": {"issuer": "node key", "serial": "73f1b7de"}}}"#;

    #[test]
    fn a_node_section_round_trips_and_its_absence_reads_as_before() {
        let e = Expectation::from_json(NODE, "e").unwrap();
        let node = e.node.as_ref().unwrap();
        assert_eq!(node.modules[0], "nvidia-current");
        assert_eq!(
            node.signer.as_ref().unwrap().describe(),
            "node key (serial 73f1b7de)"
        );
        let back = Expectation::from_json(&e.to_json(), "e").unwrap();
        assert_eq!(back, e);
        let old = Expectation::from_json(r#"{"format": 2, "driver": ">=550"}"#, "e").unwrap();
        assert_eq!(old.node, None);
        assert!(!old.to_json().contains("node"));
    }

    #[test]
    fn a_node_section_the_checks_could_not_use_is_refused() {
        for (from, to, want) in [
            (
                "6.1.0-28-cloud-amd64",
                "../6.1",
                "Invalid `node.kernel_abi` value `../6.1`",
            ),
            ("535.309.01", "535.x", "Invalid `node.driver` value `535.x`"),
            (
                "\"proprietary\"",
                "\"any\"",
                "Invalid `node.flavour` value `any`",
            ),
            (
                "\"nvidia-current\", ",
                "\"a/b\", ",
                "Invalid `node.modules` value `a/b`",
            ),
            (
                "\"nvidia-current\", ",
                "\"x.ko\", ",
                "Invalid `node.modules` value `x.ko`",
            ),
            (
                "73f1b7de",
                "73:F1",
                "Invalid `node.signer.serial` value `73:F1`",
            ),
            (
                "\"format\": 2",
                "\"format\": 1",
                "`node` needs expectation format 2 (the file says format 1)",
            ),
        ] {
            let text = NODE.replacen(from, to, 1);
            assert_ne!(text, NODE);
            let e = Expectation::from_json(&text, "e").unwrap_err();
            assert_eq!(e.to_string(), want);
        }
        let none = NODE.replace(r#"["nvidia-current", "nvidia-current-uvm"]"#, "[]");
        let e = Expectation::from_json(&none, "e").unwrap_err();
        assert_eq!(e.to_string(), "Invalid `node.modules` value ``");
        let unknown = NODE.replace("\"driver\"", "\"drivr\"");
        assert!(Expectation::from_json(&unknown, "e").is_err());
    }
}
