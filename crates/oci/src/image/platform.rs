//! [`Platform`]: the OS, architecture and variant an image is for, as its config and index
//! state them (`linux/amd64`, `linux/arm64/v8`). The profile parses it from `platform:`; this
//! file only holds the value and prints it. Must never parse a profile.

/// The image's target platform, from `platform: os/arch[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
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
