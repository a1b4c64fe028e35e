//! Target `require`: the `NVIDIA_REQUIRE_*` grammar (`selftest::evaluate_require`) and the
//! selection of requirements from an image's environment (`selftest::requirements`).
//!
//! An input is text: the predicate on the first line, then `key=value` lines giving the GPU's
//! facts (`cuda`, `driver`, `arch`, `brand`; absent = unknown) and `env:NAME=value` lines.
//! Properties: an unknown fact never fails an expression; the expression reported as failing
//! is one of the predicate's and fails alone; `>=`/`<` and `=`/`!=` are complements.

use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Result, Unstructured};
use gpuimg_selftest::{evaluate_require, requirements, Outcome, RequireFacts};

use crate::fuzz::harness::{files, Target, Verdict};
use crate::fuzz::mutate;

pub static TARGET: Target = Target {
    name: "require",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 8_000,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "require")
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

const DICT: &[&[u8]] = &[
    b" ",
    b",",
    b"=",
    b"!=",
    b"<",
    b"<=",
    b">",
    b">=",
    b"==",
    b"=<",
    b"!",
    b"cuda",
    b"driver",
    b"arch",
    b"brand",
    b"CUDA",
    b"Brand",
    b"jetpack",
    b"12.4",
    b"9.0",
    b"580.159.04",
    b"0",
    b"18446744073709551616",
    b"1.",
    b".1",
    b"..",
    b"tesla",
    b"TESLA",
    b"\t",
    b"\n",
    b"cuda>=",
    b"brand=",
    b",,",
    b"  ",
];

#[derive(Debug, Arbitrary)]
enum Key {
    Cuda,
    Driver,
    Arch,
    Brand,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Value {
    Version(Vec<u32>),
    Brand(u8),
    Raw(String),
}

#[derive(Debug, Arbitrary)]
struct Expr {
    key: Key,
    op: u8,
    value: Value,
}

const OPS: &[&str] = &["=", "!=", "<", "<=", ">", ">=", "==", "=!", "<>", ""];
const BRANDS: &[&str] = &["tesla", "unknown", "nvidia", "geforce", "Quadro", ""];

fn version(v: &[u32]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

fn render(e: &Expr) -> String {
    let key = match &e.key {
        Key::Cuda => "cuda",
        Key::Driver => "driver",
        Key::Arch => "arch",
        Key::Brand => "brand",
        Key::Other(s) => s.as_str(),
    };
    let value = match &e.value {
        Value::Version(v) => version(v),
        Value::Brand(b) => BRANDS[usize::from(*b) % BRANDS.len()].to_string(),
        Value::Raw(s) => s.clone(),
    };
    format!("{key}{}{value}", OPS[usize::from(e.op) % OPS.len()])
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    if u.arbitrary()? {
        return mutate::text(u, seeds, DICT);
    }
    // From the grammar: OR-terms of AND-ed expressions, and some facts.
    let terms: Vec<Vec<Expr>> = u.arbitrary()?;
    let mut s = terms
        .iter()
        .map(|t| t.iter().map(render).collect::<Vec<_>>().join(","))
        .collect::<Vec<_>>()
        .join(" ");
    for key in ["cuda", "driver", "arch", "brand"] {
        match u.int_in_range(0..=2u8)? {
            0 => {}
            1 => {
                let v: Vec<u32> = u.arbitrary()?;
                s.push_str(&format!("\n{key}={}", version(&v)));
            }
            _ => {
                let v: String = u.arbitrary()?;
                s.push_str(&format!("\n{key}={}", v.replace('\n', "")));
            }
        }
    }
    for _ in 0..u.int_in_range(0..=3u8)? {
        let name = [
            "NVIDIA_REQUIRE_CUDA",
            "NVIDIA_DISABLE_REQUIRE",
            "CUDA_VERSION",
        ][u.choose_index(3)?];
        let v: String = u.arbitrary()?;
        s.push_str(&format!("\nenv:{name}={}", v.replace('\n', "")));
    }
    Ok(s.into_bytes())
}

/// The four facts a case gives (`None` = unknown).
#[derive(Default)]
struct Facts {
    cuda: Option<String>,
    driver: Option<String>,
    arch: Option<String>,
    brand: Option<String>,
}

impl Facts {
    fn view(&self) -> RequireFacts<'_> {
        RequireFacts {
            cuda: self.cuda.as_deref(),
            driver: self.driver.as_deref(),
            arch: self.arch.as_deref(),
            brand: self.brand.as_deref(),
        }
    }
}

/// `key op value` split where the evaluator splits it, for the complement property.
fn split_expr(e: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!');
    let k = e.find(is_op)?;
    let rest = &e[k..];
    let o = rest.find(|c: char| !is_op(c))?;
    Some((&e[..k], &rest[..o], &rest[o..]))
}

fn check(input: &[u8]) -> Verdict {
    let text = String::from_utf8_lossy(input);
    let mut lines = text.split('\n');
    let predicate = lines.next().unwrap_or("");
    let mut facts = Facts::default();
    let mut env = BTreeMap::new();
    for l in lines {
        if let Some((k, v)) = l.strip_prefix("env:").and_then(|l| l.split_once('=')) {
            env.insert(k.to_string(), v.to_string());
            continue;
        }
        match l.split_once('=') {
            Some(("cuda", v)) => facts.cuda = Some(v.into()),
            Some(("driver", v)) => facts.driver = Some(v.into()),
            Some(("arch", v)) => facts.arch = Some(v.into()),
            Some(("brand", v)) => facts.brand = Some(v.into()),
            _ => {}
        }
    }
    let f = facts.view();
    let outcome = evaluate_require(predicate, &f);
    // With nothing known, nothing can fail.
    if let Ok(Outcome::Unsatisfied(e)) = evaluate_require(predicate, &RequireFacts::default()) {
        return Err(format!("`{e}` failed with every fact unknown"));
    }
    if let Ok(Outcome::Unsatisfied(e)) = &outcome {
        let exprs: Vec<&str> = predicate
            .split([' ', ','])
            .filter(|x| !x.is_empty())
            .collect();
        if !exprs.contains(&e.as_str()) {
            return Err(format!(
                "reported `{e}`, which is not an expression of the input"
            ));
        }
        if evaluate_require(e, &f) != Ok(Outcome::Unsatisfied(e.clone())) {
            return Err(format!(
                "`{e}` was reported failing but does not fail alone"
            ));
        }
    }
    for e in predicate.split([' ', ',']).filter(|x| !x.is_empty()) {
        let Some((key, op, value)) = split_expr(e) else {
            continue;
        };
        let complement = match op {
            ">=" => "<",
            "<" => ">=",
            "<=" => ">",
            ">" => "<=",
            "=" => "!=",
            "!=" => "=",
            _ => continue,
        };
        let a = evaluate_require(e, &f);
        let b = evaluate_require(&format!("{key}{complement}{value}"), &f);
        if let (Ok(a), Ok(b)) = (&a, &b) {
            let known = match key.to_ascii_lowercase().as_str() {
                "cuda" => f.cuda.is_some(),
                "driver" => f.driver.is_some(),
                "arch" => f.arch.is_some(),
                "brand" => f.brand.is_some(),
                _ => false,
            };
            if known && (*a == Outcome::Satisfied) == (*b == Outcome::Satisfied) {
                return Err(format!(
                    "`{e}` and `{key}{complement}{value}` agree ({a:?})"
                ));
            }
        }
    }
    let baked = BTreeMap::new();
    if let Some(reqs) = requirements(&env, &baked) {
        if let Some(k) = reqs
            .keys()
            .find(|k| !k.starts_with("NVIDIA_REQUIRE_") || k.as_str() == "NVIDIA_REQUIRE_JETPACK")
        {
            return Err(format!("requirements() kept `{k}`"));
        }
        for v in reqs.values() {
            let _ = evaluate_require(v, &f);
        }
    }
    Ok(match outcome {
        Ok(Outcome::Satisfied) => "satisfied",
        Ok(Outcome::Unsatisfied(_)) => "unsatisfied",
        Err(_) => "invalid",
    })
}
