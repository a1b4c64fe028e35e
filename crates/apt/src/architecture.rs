//! [`DebianArch`]: the image's CPU architecture by the name Debian's packages give it
//! (`amd64`, `arm64`, `ppc64el`), from its OCI name.
//!
//! Must never guess from the build host: the architecture is the profile's platform's.

use std::fmt;

/// A Debian architecture name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebianArch(String);

impl DebianArch {
    /// The Debian name of the OCI architecture `oci` (`ppc64le` is Debian's `ppc64el`; the
    /// others are the same).
    pub fn from_oci(oci: &str) -> Self {
        DebianArch(match oci {
            "ppc64le" => "ppc64el".to_string(),
            other => other.to_string(),
        })
    }

    /// The name (`amd64`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DebianArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for DebianArch {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_names_of_oci_architectures() {
        let name = |a: &str| DebianArch::from_oci(a).to_string();
        assert_eq!(name("amd64"), "amd64");
        assert_eq!(name("arm64"), "arm64");
        assert_eq!(name("ppc64le"), "ppc64el");
        assert_eq!(name("riscv64"), "riscv64");
        assert_eq!(DebianArch::from_oci("ppc64le").as_str(), "ppc64el");
    }
}
