//! `Explanation`: why nothing works, fact by fact, and the nearest changes that would.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::fact::{Conflict, Fact};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// The candidate ruled out (`pytorch 2.11.0 (cu130)`).
    pub candidate: String,
    /// "A [source]; B [source]; so C".
    pub because: String,
    pub unverified: bool,
    /// The facts `because` states, each with its sources.
    pub facts: Vec<Fact>,
    /// What they rule out (`pytorch 2.11.0 (cu130) cannot run on V100`).
    pub conclusion: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    pub summary: String,
    pub reasons: Vec<Reason>,
    /// Candidates ruled out but not listed (the list is capped).
    pub more: usize,
    /// Single changes to the profile that resolve.
    pub suggestions: Vec<String>,
}

const SHOWN: usize = 8;

impl Explanation {
    pub(super) fn new(summary: String, fails: Vec<(String, Conflict)>) -> Explanation {
        let more = fails.len().saturating_sub(SHOWN);
        let reasons = fails
            .into_iter()
            .take(SHOWN)
            .map(|(candidate, c)| Reason {
                candidate,
                unverified: c.rests_on_unverified(),
                because: c.render(),
                facts: c.facts,
                conclusion: c.conclusion,
            })
            .collect();
        Explanation {
            summary,
            reasons,
            more,
            suggestions: vec![],
        }
    }

    pub fn rests_on_unverified(&self) -> bool {
        self.reasons.iter().any(|r| r.unverified)
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.summary)?;
        for r in &self.reasons {
            write!(f, "\n  - {}: {}", r.candidate, r.because)?;
        }
        if self.more > 0 {
            write!(f, "\n  - ... and {} older candidates", self.more)?;
        }
        if self.rests_on_unverified() {
            write!(
                f,
                "\n  note: part of this answer rests on facts marked unverified in the catalog"
            )?;
        }
        for s in &self.suggestions {
            write!(f, "\nhint: {s}")?;
        }
        Ok(())
    }
}
