//! Which platforms a command runs for: every one the profile names (`platform:` or
//! `platforms:`), or the one `--platform` picks from them; and, for `verify-host`, the one this
//! host runs. Must never resolve or build: it only chooses.

use super::OpsError;
use crate::profile::{Platform, Profile};

/// The platforms to run for, in the profile's order: all of them, or `pick` (which must be one
/// of them).
pub fn chosen(profile: &Profile, pick: Option<&Platform>) -> Result<Vec<Platform>, OpsError> {
    match pick {
        None => Ok(profile.platforms.clone()),
        Some(p) if profile.platforms.contains(p) => Ok(vec![p.clone()]),
        Some(p) => Err(OpsError::UnknownPlatform {
            platform: p.to_string(),
            profile: profile.file.clone(),
            has: names(&profile.platforms),
        }),
    }
}

/// The profile as seen from this host: its platform of gpuimg's own architecture where it
/// names one, else its first.
pub fn for_this_host(profile: &Profile) -> Profile {
    let own = own_architecture();
    match profile.platforms.iter().find(|p| p.architecture == own) {
        Some(p) => profile.for_platform(p),
        None => profile.clone(),
    }
}

/// gpuimg's own architecture, as OCI names it (`amd64`, `arm64`).
pub fn own_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `` `linux/amd64`, `linux/arm64` ``.
pub fn names(platforms: &[Platform]) -> String {
    platforms
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
