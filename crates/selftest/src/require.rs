//! `NVIDIA_REQUIRE_*` evaluation with the semantics of libnvidia-container's `dsl_evaluate`
//! (the NVIDIA Container Toolkit checks these variables with it when it starts a container).
//!
//! Space-separated OR-terms of comma-separated AND-ed `key op value` expressions; keys `cuda`,
//! `driver`, `arch`, `brand`; versions compare numerically dot by dot, brands case-insensitively.
//! A fact that is unknown satisfies its expression, as in libnvidia-container. Pure functions.

use std::cmp::Ordering;
use std::collections::BTreeMap;

/// What one GPU and its driver offer to the expressions.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequireFacts<'a> {
    /// The driver's CUDA version (`13.0`).
    pub cuda: Option<&'a str>,
    /// The kernel module version (`580.159.04`).
    pub driver: Option<&'a str>,
    /// Compute capability (`9.0`).
    pub arch: Option<&'a str>,
    /// NVML brand (`tesla`).
    pub brand: Option<&'a str>,
}

/// A requirement the evaluator cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid expression `{expression}`")]
pub struct InvalidRequirement {
    pub expression: String,
}

/// The result of evaluating one requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Satisfied,
    /// The last expression that failed (`driver>=575`).
    Unsatisfied(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

const OPS: [(&str, Op); 6] = [
    ("=", Op::Eq),
    ("!=", Op::Ne),
    ("<", Op::Lt),
    ("<=", Op::Le),
    (">", Op::Gt),
    (">=", Op::Ge),
];

/// Evaluate one `NVIDIA_REQUIRE_*` value against one GPU's facts.
pub fn evaluate(predicate: &str, facts: &RequireFacts<'_>) -> Result<Outcome, InvalidRequirement> {
    let mut last_failed: Option<String> = None;
    for term in predicate.split(' ').filter(|t| !t.is_empty()) {
        let mut term_ok = true;
        for expr in term.split(',').filter(|e| !e.is_empty()) {
            if !evaluate_expression(expr, facts)? {
                last_failed = Some(expr.to_string());
                term_ok = false;
                break;
            }
        }
        if term_ok {
            return Ok(Outcome::Satisfied);
        }
    }
    Ok(match last_failed {
        Some(e) => Outcome::Unsatisfied(e),
        None => Outcome::Satisfied,
    })
}

fn evaluate_expression(expr: &str, facts: &RequireFacts<'_>) -> Result<bool, InvalidRequirement> {
    let invalid = || InvalidRequirement {
        expression: expr.to_string(),
    };
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!');
    let key_end = expr.find(is_op).filter(|i| *i > 0).ok_or_else(invalid)?;
    let rest = &expr[key_end..];
    let op_end = rest.find(|c: char| !is_op(c)).ok_or_else(invalid)?;
    let op = OPS
        .iter()
        .find(|(s, _)| *s == &rest[..op_end])
        .map(|(_, op)| *op)
        .ok_or_else(invalid)?;
    let (key, value) = (&expr[..key_end], &rest[op_end..]);
    let fact = match key.to_ascii_lowercase().as_str() {
        "cuda" => facts.cuda,
        "driver" => facts.driver,
        "arch" => facts.arch,
        "brand" => facts.brand,
        _ => return Err(invalid()),
    };
    let Some(fact) = fact else {
        return Ok(true);
    };
    if key.eq_ignore_ascii_case("brand") {
        return match op {
            Op::Eq => Ok(fact.eq_ignore_ascii_case(value)),
            Op::Ne => Ok(!fact.eq_ignore_ascii_case(value)),
            _ => Err(invalid()),
        };
    }
    let order = compare_versions(fact, value).ok_or_else(invalid)?;
    Ok(match op {
        Op::Eq => order == Ordering::Equal,
        Op::Ne => order != Ordering::Equal,
        Op::Lt => order == Ordering::Less,
        Op::Le => order != Ordering::Greater,
        Op::Gt => order == Ordering::Greater,
        Op::Ge => order != Ordering::Less,
    })
}

/// Dot-separated numbers compared field by field; trailing zero fields do not count.
/// `None` when either side holds anything but digits and dots.
fn compare_versions(a: &str, b: &str) -> Option<Ordering> {
    let fields = |s: &str| -> Option<Vec<u64>> {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        s.split('.')
            .filter(|f| !f.is_empty())
            .map(|f| f.parse::<u64>().ok())
            .collect()
    };
    Some(gpuimg_expect::compare_fields(&fields(a)?, &fields(b)?))
}

/// `true`, `1`, `t`… as Go's `strconv.ParseBool` reads them (the toolkit's parser).
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The requirements in force: `None` when `NVIDIA_DISABLE_REQUIRE` is true, else every
/// `NVIDIA_REQUIRE_*` but JETPACK (environment over the expectation's baked copy), with
/// `cuda>=major.minor` derived from `CUDA_VERSION` when `NVIDIA_REQUIRE_CUDA` is absent.
pub fn requirements(
    env: &BTreeMap<String, String>,
    baked: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let get = |k: &str| env.get(k).or_else(|| baked.get(k));
    if get("NVIDIA_DISABLE_REQUIRE").and_then(|v| parse_bool(v)) == Some(true) {
        return None;
    }
    let mut out: BTreeMap<String, String> = baked
        .iter()
        .chain(env.iter())
        .filter(|(k, _)| k.starts_with("NVIDIA_REQUIRE_") && k.as_str() != "NVIDIA_REQUIRE_JETPACK")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !out.contains_key("NVIDIA_REQUIRE_CUDA") {
        if let Some(v) = get("CUDA_VERSION") {
            let mut parts = v.split('.');
            if let (Some(major), Some(minor)) = (parts.next(), parts.next()) {
                out.insert(
                    "NVIDIA_REQUIRE_CUDA".to_string(),
                    format!("cuda>={major}.{minor}"),
                );
            }
        }
    }
    Some(out)
}
