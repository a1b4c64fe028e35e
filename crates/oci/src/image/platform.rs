//! [`Platform`]: the OS, architecture and variant an image is for, as its config and index
//! state them (`linux/amd64`, `linux/arm64/v8`): the value, its `os/arch[/variant]` text form
//! parsed ([`Platform::parse`]: the profile's `platform:`/`platforms:`, `--platform`) and
//! printed. Must never read a profile.

/// The image's target platform, from `platform: os/arch[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// `os/arch[/variant]`, each part ASCII letters and digits; `None` for anything else.
    pub fn parse(s: &str) -> Option<Platform> {
        let parts: Vec<&str> = s.split('/').collect();
        let ok = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric());
        match parts.as_slice() {
            [os, arch] if ok(os) && ok(arch) => Some(Platform {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: None,
            }),
            [os, arch, v] if ok(os) && ok(arch) && ok(v) => Some(Platform {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: Some(v.to_string()),
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}
