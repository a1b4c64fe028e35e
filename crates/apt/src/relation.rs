//! Package relations: `Depends`, `Pre-Depends`, `Provides`, `Conflicts`, `Breaks` fields.
//!
//! Owns parsing and version-constraint checks. Must never look up packages (the solver does).

use std::fmt;

use crate::version::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "<<" => Op::Lt,
            "<=" | "<" => Op::Le,
            "=" => Op::Eq,
            ">=" | ">" => Op::Ge,
            ">>" => Op::Gt,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<<",
            Op::Le => "<=",
            Op::Eq => "=",
            Op::Ge => ">=",
            Op::Gt => ">>",
        }
    }

    pub fn holds(self, have: &Version, want: &Version) -> bool {
        let o = have.cmp(want);
        match self {
            Op::Lt => o.is_lt(),
            Op::Le => o.is_le(),
            Op::Eq => o.is_eq(),
            Op::Ge => o.is_ge(),
            Op::Gt => o.is_gt(),
        }
    }
}

/// An architecture qualifier on a relation (`name:any`, `name:native`, `name:amd64`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchQual {
    None,
    Any,
    Native,
    Named(String),
}

/// One relation: `name[:arch] [(op version)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub name: String,
    pub arch: ArchQual,
    pub constraint: Option<(Op, Version)>,
}

impl Relation {
    /// Whether `version` satisfies this relation's constraint (a missing constraint always does).
    pub fn accepts(&self, version: &Version) -> bool {
        self.constraint
            .as_ref()
            .is_none_or(|(op, want)| op.holds(version, want))
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        match &self.arch {
            ArchQual::None => {}
            ArchQual::Any => f.write_str(":any")?,
            ArchQual::Native => f.write_str(":native")?,
            ArchQual::Named(a) => write!(f, ":{a}")?,
        }
        if let Some((op, v)) = &self.constraint {
            write!(f, " ({} {v})", op.as_str())?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("Invalid relation `{text}`")]
pub struct RelationError {
    pub text: String,
}

/// Parse a comma-separated list of `|`-separated alternatives.
pub fn parse_alternatives(field: &str) -> Result<Vec<Vec<Relation>>, RelationError> {
    let mut out = Vec::new();
    for group in field.split(',') {
        if group.trim().is_empty() {
            continue;
        }
        let alts = group
            .split('|')
            .map(parse_one)
            .collect::<Result<Vec<_>, _>>()?;
        out.push(alts);
    }
    Ok(out)
}

/// Parse a comma-separated list of single relations (Provides, Conflicts, Breaks).
pub fn parse_list(field: &str) -> Result<Vec<Relation>, RelationError> {
    field
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_one)
        .collect()
}

fn parse_one(text: &str) -> Result<Relation, RelationError> {
    let err = || RelationError {
        text: text.trim().to_string(),
    };
    // Drop architecture restrictions `[...]` and build profiles `<...>` (source-only syntax).
    let cut = text.find(['[', '<']).unwrap_or(text.len());
    let (head, constraint) = match text[..cut].find('(') {
        Some(open) => {
            let close = text[open..].find(')').ok_or_else(err)? + open;
            (&text[..open], Some(text[open + 1..close].trim()))
        }
        None => (&text[..cut], None),
    };
    let head = head.trim();
    let (name, arch) = match head.split_once(':') {
        Some((n, "any")) => (n, ArchQual::Any),
        Some((n, "native")) => (n, ArchQual::Native),
        Some((n, a)) => (n, ArchQual::Named(a.to_string())),
        None => (head, ArchQual::None),
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(err());
    }
    let constraint = match constraint {
        Some(c) => {
            let split = c
                .find(|ch: char| !matches!(ch, '<' | '>' | '='))
                .ok_or_else(err)?;
            let op = Op::parse(c[..split].trim()).ok_or_else(err)?;
            let v = Version::parse(c[split..].trim()).map_err(|_| err())?;
            Some((op, v))
        }
        None => None,
    };
    Ok(Relation {
        name: name.to_string(),
        arch,
        constraint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_alternatives_and_qualifiers() {
        let r = parse_alternatives("libc6 (>= 2.34), python3:any (>= 3.11~) | python3-x,\n perl")
            .unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0][0].to_string(), "libc6 (>= 2.34)");
        assert_eq!(r[1][0].arch, ArchQual::Any);
        assert_eq!(r[1][1].name, "python3-x");
        assert!(r[0][0].accepts(&Version::parse("2.36-9").unwrap()));
        assert!(!r[0][0].accepts(&Version::parse("2.31").unwrap()));
        assert!(parse_list("a (~ 1)").is_err());
    }
}
