//! A `Fact` is one statement from the catalog with its sources; a `Conflict` is the chain of
//! facts that rules a candidate out. Explanations are built from these and nothing else.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fact {
    pub text: String,
    pub sources: Vec<String>,
    /// No source confirmed this fact.
    pub unverified: bool,
}

impl Fact {
    pub fn new(text: impl Into<String>, sources: &[String]) -> Fact {
        Fact {
            text: text.into(),
            sources: sources.to_vec(),
            unverified: false,
        }
    }

    /// A fact stated by the profile itself (no catalog source).
    pub fn profile(text: impl Into<String>) -> Fact {
        Fact {
            text: text.into(),
            sources: vec!["profile".into()],
            unverified: false,
        }
    }

    pub fn unverified_if(mut self, yes: bool) -> Fact {
        self.unverified |= yes;
        self
    }

    /// `text [source, source]`, with `(unverified)` when no source confirmed it.
    pub fn render(&self) -> String {
        let mut s = format!("{} [{}]", self.text, self.sources.join(", "));
        if self.unverified {
            s.push_str(" (unverified)");
        }
        s
    }
}

/// Why a candidate (or a whole request) cannot work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub facts: Vec<Fact>,
    pub conclusion: String,
}

impl Conflict {
    pub fn new(facts: Vec<Fact>, conclusion: impl Into<String>) -> Conflict {
        Conflict {
            facts,
            conclusion: conclusion.into(),
        }
    }

    /// "A [s]; B [s]; so C".
    pub fn render(&self) -> String {
        let facts: Vec<String> = self.facts.iter().map(Fact::render).collect();
        if facts.is_empty() {
            return self.conclusion.clone();
        }
        format!("{}; so {}", facts.join("; "), self.conclusion)
    }

    pub fn rests_on_unverified(&self) -> bool {
        self.facts.iter().any(|f| f.unverified)
    }
}
