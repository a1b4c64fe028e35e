//! What one fatbin entry is for ([`Target`]: `sm_90`, `sm_90a`, `sm_100f`, `compute_90`) and
//! which GPUs can select it ([`Target::selectable_by`]), as the CUDA driver chooses.

use std::fmt;
use std::str::FromStr;

/// A GPU's compute capability (`9.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cc {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Cc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A compute capability that is not `MAJOR.MINOR` (`9.0`, `10.3`) or `sm_XY`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid compute capability `{0}` (expected MAJOR.MINOR such as 9.0, or sm_90)")]
pub struct InvalidCc(pub String);

impl FromStr for Cc {
    type Err = InvalidCc;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidCc(s.to_string());
        let (major, minor) = match s.strip_prefix("sm_") {
            Some(d) if (2..=4).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) => {
                d.split_at(d.len() - 1)
            }
            Some(_) => return Err(bad()),
            None => s.split_once('.').ok_or_else(bad)?,
        };
        let num = |t: &str| -> Result<u32, InvalidCc> {
            if t.is_empty() || t.len() > 3 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        };
        let cc = Cc {
            major: num(major)?,
            minor: num(minor)?,
        };
        if cc.minor > 9 || cc.major == 0 {
            return Err(bad());
        }
        Ok(cc)
    }
}

/// Machine code for one GPU generation, or PTX the driver compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    Cubin,
    Ptx,
}

/// Plain, arch-specific (`a`: exactly that capability) or family-specific (`f`: that major
/// from that minor on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    Plain,
    ArchSpecific,
    Family,
}

/// What one entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub code: Code,
    pub major: u32,
    pub minor: u32,
    pub variant: Variant,
}

impl Target {
    /// Whether a GPU of capability `cc` can select this entry: a plain cubin of the same
    /// major with a minor ≤ the GPU's; an arch-specific one (cubin or PTX) only on exactly
    /// its capability; a family one on the same major with a minor ≥ its own; plain PTX of a
    /// capability ≤ the GPU's.
    pub fn selectable_by(&self, cc: Cc) -> bool {
        let same_major = cc.major == self.major;
        match (self.code, self.variant) {
            (_, Variant::ArchSpecific) => same_major && cc.minor == self.minor,
            (_, Variant::Family) => same_major && cc.minor >= self.minor,
            (Code::Cubin, Variant::Plain) => same_major && cc.minor >= self.minor,
            (Code::Ptx, Variant::Plain) => (cc.major, cc.minor) >= (self.major, self.minor),
        }
    }

    /// Whether any of `gpus` can select this entry.
    pub fn selectable_by_any(&self, gpus: &[Cc]) -> bool {
        gpus.iter().any(|g| self.selectable_by(*g))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = match self.code {
            Code::Cubin => "sm",
            Code::Ptx => "compute",
        };
        let suffix = match self.variant {
            Variant::Plain => "",
            Variant::ArchSpecific => "a",
            Variant::Family => "f",
        };
        write!(f, "{prefix}_{}{}{suffix}", self.major, self.minor)
    }
}

impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
