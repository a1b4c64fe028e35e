//! [`Architecture`]: the image's CPU architecture by its OCI name (`amd64`, `arm64`), and the
//! names Debian's packages and Python's `platform.machine()` give it.
//!
//! Must never guess from the build host: the architecture is the profile's platform's.

/// An OCI architecture name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Architecture(String);

impl Architecture {
    pub fn new(oci: impl Into<String>) -> Self {
        Architecture(oci.into())
    }

    /// The OCI name (`amd64`).
    pub fn oci(&self) -> &str {
        &self.0
    }

    /// The Debian architecture name (`ppc64le` is Debian's `ppc64el`).
    pub fn debian(&self) -> gpuimg_apt::DebianArch {
        gpuimg_apt::DebianArch::from_oci(&self.0)
    }

    /// Python's `platform.machine()` (`x86_64`, `aarch64`).
    pub fn python_machine(&self) -> &str {
        match self.0.as_str() {
            "amd64" => "x86_64",
            "arm64" => "aarch64",
            "386" => "i686",
            "arm" => "armv7l",
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_for_each_architecture() {
        let names = |a: &str| {
            let a = Architecture::new(a);
            (a.debian().to_string(), a.python_machine().to_string())
        };
        assert_eq!(names("amd64"), ("amd64".into(), "x86_64".into()));
        assert_eq!(names("arm64"), ("arm64".into(), "aarch64".into()));
        assert_eq!(names("ppc64le"), ("ppc64el".into(), "ppc64le".into()));
        assert_eq!(names("riscv64"), ("riscv64".into(), "riscv64".into()));
        assert_eq!(Architecture::new("arm64").oci(), "arm64");
    }
}
