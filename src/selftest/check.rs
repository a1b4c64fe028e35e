//! One check's result and the verdict over all checks.
//!
//! Plain data rendered by `report`; the JSON field names are a contract scripts read: they do
//! not change.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Warn,
    Skip,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Warn => "warn",
            Status::Skip => "skip",
        }
    }
}

/// One check: what was expected, what was measured, and why it passed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub expected: Option<String>,
    pub measured: Option<String>,
    pub detail: Option<String>,
}

impl Check {
    pub fn new(name: impl Into<String>, status: Status) -> Check {
        Check {
            name: name.into(),
            status,
            expected: None,
            measured: None,
            detail: None,
        }
    }

    pub fn expected(mut self, v: impl Into<String>) -> Check {
        self.expected = Some(v.into());
        self
    }

    pub fn measured(mut self, v: impl Into<String>) -> Check {
        self.measured = Some(v.into());
        self
    }

    pub fn detail(mut self, v: impl Into<String>) -> Check {
        self.detail = Some(v.into());
        self
    }
}

/// The overall answer, and the exit code it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    NoGpu,
    Error,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::NoGpu => 4,
            Verdict::Error => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::NoGpu => "no-gpu",
            Verdict::Error => "error",
        }
    }
}
