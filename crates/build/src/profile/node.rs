//! The profile's YAML as a tree of positioned nodes, `${VAR}` expanded inside each scalar.
//!
//! Built from the parser's event stream, so the structure is fixed before any value is
//! expanded. Enforces the profile's limits (nesting, nodes, alias expansion, value size), one
//! document, scalar keys without duplicates, no NUL and no tags beyond the core schema's.
//! Must never type values for the schema: that is `de.rs`, driven by the target types.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_saphyr::granit_parser::{
    ErrorKind, Event, Marker, Options, Parser, ScalarStyle, ScanError, Span, Tag,
};

use super::expand::{expand, reference_offsets};

/// Largest profile file read.
pub(super) const MAX_PROFILE_BYTES: usize = 1 << 20;
/// Largest scalar after `${VAR}` expansion.
pub(super) const MAX_SCALAR_BYTES: usize = 64 << 10;
/// Deepest nesting of mappings and sequences.
const MAX_DEPTH: usize = 64;
/// Most nodes, counting each alias as a copy of what it names.
const MAX_NODES: usize = 100_000;
/// Most scalar bytes in all, counting each alias as a copy of what it names.
const MAX_TOTAL_BYTES: usize = 16 << 20;

/// 1-based line and column in the profile text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub line: u32,
    pub column: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Clone, Debug)]
pub(super) enum Kind {
    /// `plain`: typed by YAML's core schema (null, bool, int, float, else string) when the
    /// target asks; false for quoted, block and `!!str` scalars, and for plain scalars that
    /// mix text with `${VAR}` (a sole `${N}` stays plain and types as its value would).
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// Where the key at the end of `path` (mapping keys from this node down) is written.
    pub fn key_pos(&self, path: &[&str]) -> Option<Pos> {
        let (first, rest) = path.split_first()?;
        let Kind::Map(entries) = &self.kind else {
            return None;
        };
        let (k, v) = entries
            .iter()
            .find(|(k, _)| matches!(&k.kind, Kind::Scalar { text, .. } if text == first))?;
        if rest.is_empty() {
            Some(k.pos)
        } else {
            v.key_pos(rest)
        }
    }
}

/// A problem with the profile text at a position.
#[derive(Debug)]
pub(super) struct Problem {
    pub pos: Pos,
    pub message: String,
}

fn problem(pos: Pos, message: impl Into<String>) -> Problem {
    Problem {
        pos,
        message: message.into(),
    }
}

fn pos_of(m: &Marker) -> Pos {
    Pos {
        line: u32::try_from(m.line()).unwrap_or(u32::MAX),
        column: u32::try_from(m.col() + 1).unwrap_or(u32::MAX),
    }
}

/// Parse `text` into one node tree, expanding `${NAME}` from `env` inside scalars.
/// An empty document is an empty mapping.
pub(super) fn build(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Node, Problem> {
    let mut options = Options::default();
    options.set_emit_comments(false);
    options.block_nesting_limit = MAX_DEPTH;
    options.flow_nesting_limit = MAX_DEPTH;
    let mut b = Builder {
        text,
        env,
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        nodes: 0,
        bytes: 0,
    };
    let mut documents = 0;
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, span) = event.map_err(|e| scan_problem(e, text))?;
        let pos = pos_of(&span.start);
        match event {
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(problem(
                        pos,
                        "A profile is one YAML document; remove the second `---`",
                    ));
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                let node = b.scalar(value, style, tag.as_deref(), &span)?;
                b.add(node, anchor)?;
            }
            Event::SequenceStart(_, anchor, tag) => {
                check_tag(tag.as_deref(), "seq", pos)?;
                b.open(pos, anchor, Frame::Seq(Vec::new()))?;
            }
            Event::MappingStart(_, anchor, tag) => {
                check_tag(tag.as_deref(), "map", pos)?;
                b.open(pos, anchor, Frame::Map(Vec::new(), None, HashMap::new()))?;
            }
            Event::SequenceEnd | Event::MappingEnd => b.close()?,
            Event::Alias(id) => {
                let node = b.anchors.get(&id).cloned().ok_or_else(|| {
                    problem(pos, "An alias may only name a node that is complete")
                })?;
                let (nodes, bytes) = size(&node);
                b.charge(pos, nodes, bytes)?;
                b.add(Node { pos, ..node }, 0)?;
            }
            _ => {}
        }
    }
    Ok(b.root.unwrap_or(Node {
        pos: Pos { line: 1, column: 1 },
        kind: Kind::Map(Vec::new()),
    }))
}

enum Frame {
    Seq(Vec<Node>),
    /// Entries, the key waiting for its value, and where each key was first written.
    Map(Vec<(Node, Node)>, Option<Node>, HashMap<String, Pos>),
}

struct Builder<'t> {
    text: &'t str,
    env: &'t dyn Fn(&str) -> Option<String>,
    stack: Vec<(Pos, usize, Frame)>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    nodes: usize,
    bytes: usize,
}

impl Builder<'_> {
    fn charge(&mut self, pos: Pos, nodes: usize, bytes: usize) -> Result<(), Problem> {
        self.nodes += nodes;
        self.bytes += bytes;
        if self.nodes > MAX_NODES {
            return Err(problem(
                pos,
                format!(
                    "Profile too large: more than {MAX_NODES} values (aliases count as copies)"
                ),
            ));
        }
        if self.bytes > MAX_TOTAL_BYTES {
            return Err(problem(
                pos,
                format!("Profile too large: its values exceed {MAX_TOTAL_BYTES} bytes in all (aliases count as copies)"),
            ));
        }
        Ok(())
    }

    fn open(&mut self, pos: Pos, anchor: usize, frame: Frame) -> Result<(), Problem> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(pos));
        }
        self.charge(pos, 1, 0)?;
        self.stack.push((pos, anchor, frame));
        Ok(())
    }

    fn close(&mut self) -> Result<(), Problem> {
        let Some((pos, anchor, frame)) = self.stack.pop() else {
            return Ok(());
        };
        let kind = match frame {
            Frame::Seq(items) => Kind::Seq(items),
            Frame::Map(entries, _, _) => Kind::Map(merge_keys(entries)?),
        };
        self.add(Node { pos, kind }, anchor)
    }

    /// Attach a finished node to the collection being built (or make it the root).
    fn add(&mut self, node: Node, anchor: usize) -> Result<(), Problem> {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some((_, _, Frame::Seq(items))) => items.push(node),
            Some((_, _, Frame::Map(entries, key, seen))) => match key.take() {
                Some(k) => entries.push((k, node)),
                None => {
                    let Kind::Scalar { text, .. } = &node.kind else {
                        return Err(problem(node.pos, "A mapping key must be a scalar"));
                    };
                    if let Some(first) = seen.get(text) {
                        return Err(problem(
                            node.pos,
                            format!(
                                "Duplicate key `{text}` (first at {}:{})",
                                first.line, first.column
                            ),
                        ));
                    }
                    seen.insert(text.clone(), node.pos);
                    *key = Some(node);
                }
            },
        }
        Ok(())
    }

    fn scalar(
        &mut self,
        value: Cow<'_, str>,
        style: ScalarStyle,
        tag: Option<&Tag>,
        span: &Span,
    ) -> Result<Node, Problem> {
        let pos = pos_of(&span.start);
        check_tag(tag, "", pos)?;
        let expanded = expand(&value, self.env, MAX_SCALAR_BYTES)
            .map_err(|e| self.problem_at(self.reference_pos(span, e.index), e.message))?;
        if expanded.text.len() > MAX_SCALAR_BYTES {
            return Err(self.problem_at(
                pos,
                format!("Profile too large: a value exceeds {MAX_SCALAR_BYTES} bytes"),
            ));
        }
        if expanded.text.contains('\0') {
            return Err(self.problem_at(pos, "A NUL character is not allowed in a profile value"));
        }
        self.charge(pos, 1, expanded.text.len())?;
        let forced_string = tag.is_some_and(|t| t.is_yaml_core_schema_tag("str"));
        let plain = style == ScalarStyle::Plain
            && !forced_string
            && (expanded.references == 0 || expanded.sole);
        Ok(Node {
            pos,
            kind: Kind::Scalar {
                text: expanded.text,
                plain,
            },
        })
    }

    /// A problem with the scalar being read, prefixed with its key path (`files.dst: ...`).
    fn problem_at(&self, pos: Pos, message: impl Into<String>) -> Problem {
        let keys: Vec<&str> = self
            .stack
            .iter()
            .filter_map(|(_, _, f)| match f {
                Frame::Map(
                    _,
                    Some(Node {
                        kind: Kind::Scalar { text, .. },
                        ..
                    }),
                    _,
                ) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let message = message.into();
        if keys.is_empty() {
            problem(pos, message)
        } else {
            problem(pos, format!("{}: {message}", keys.join(".")))
        }
    }

    /// Where the scalar's `index`-th reference is written: found in the source text, else
    /// the scalar's start (escapes in a quoted scalar can hide it).
    fn reference_pos(&self, span: &Span, index: usize) -> Pos {
        let start = pos_of(&span.start);
        let Some(raw) = span.slice(self.text) else {
            return start;
        };
        let Some(&offset) = reference_offsets(raw).get(index) else {
            return start;
        };
        let before = &raw[..offset];
        let count = |s: &str| u32::try_from(s.chars().count()).unwrap_or(u32::MAX);
        match before.rfind('\n') {
            None => Pos {
                line: start.line,
                column: start.column.saturating_add(count(before)),
            },
            Some(nl) => Pos {
                line: start
                    .line
                    .saturating_add(u32::try_from(before.matches('\n').count()).unwrap_or(0)),
                column: count(&before[nl + 1..]) + 1,
            },
        }
    }
}

/// Apply YAML merge keys (`<<: *base`, `<<: [*a, *b]`): the named mappings' entries join
/// this one, keys written here win, then the earlier source.
fn merge_keys(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, Problem> {
    let is_merge = |k: &Node| matches!(&k.kind, Kind::Scalar { text, plain: true } if text == "<<");
    if !entries.iter().any(|(k, _)| is_merge(k)) {
        return Ok(entries);
    }
    let (merges, mut out): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(k, _)| is_merge(k));
    let text = |k: &Node| match &k.kind {
        Kind::Scalar { text, .. } => Some(text.clone()),
        _ => None,
    };
    let mut seen: std::collections::HashSet<String> =
        out.iter().filter_map(|(k, _)| text(k)).collect();
    for (_, v) in merges {
        let sources = match v.kind {
            Kind::Seq(items) => items,
            _ => vec![v],
        };
        for source in sources {
            let Kind::Map(more) = source.kind else {
                return Err(problem(
                    source.pos,
                    "A merge key `<<` takes a mapping or a list of mappings",
                ));
            };
            for (k, v) in more {
                if text(&k).is_some_and(|t| seen.insert(t)) {
                    out.push((k, v));
                }
            }
        }
    }
    Ok(out)
}

/// Refuse tags other than the core schema's (`!!str`, `!!int`, ... on scalars; `!!seq`,
/// `!!map` on collections). `collection` is "seq", "map", or "" for a scalar.
fn check_tag(tag: Option<&Tag>, collection: &str, pos: Pos) -> Result<(), Problem> {
    let Some(tag) = tag else { return Ok(()) };
    let ok = match tag.core_suffix() {
        Some("str" | "int" | "float" | "bool" | "null") => collection.is_empty(),
        Some(s) => s == collection,
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(problem(
            pos,
            format!("Tag `{}` is not supported in a profile", tag.original()),
        ))
    }
}

/// Nodes and scalar bytes in `node`'s subtree.
fn size(node: &Node) -> (usize, usize) {
    match &node.kind {
        Kind::Scalar { text, .. } => (1, text.len()),
        Kind::Seq(items) => items.iter().fold((1, 0), |(n, b), i| {
            let (n2, b2) = size(i);
            (n + n2, b + b2)
        }),
        Kind::Map(entries) => entries.iter().fold((1, 0), |(n, b), (k, v)| {
            let (n2, b2) = size(k);
            let (n3, b3) = size(v);
            (n + n2 + n3, b + b2 + b3)
        }),
    }
}

fn too_deep(pos: Pos) -> Problem {
    problem(
        pos,
        format!("Profile nested too deeply: more than {MAX_DEPTH} levels"),
    )
}

fn scan_problem(e: ScanError, text: &str) -> Problem {
    let pos = pos_of(e.marker());
    if matches!(e.kind(), ErrorKind::RecursionLimitExceeded) {
        return too_deep(pos);
    }
    let info = e.info();
    let first = info.lines().next().unwrap_or("Invalid YAML").trim();
    let mut c = first.chars();
    let message = match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => "Invalid YAML".to_string(),
    };
    // Unquoted `${VAR}` ends a plain scalar in `[...]`/`{...}`: `{` is a flow indicator.
    let line = text
        .lines()
        .nth((pos.line as usize).saturating_sub(1))
        .unwrap_or("");
    if line.contains("${") && line.replace("${", "").contains(['[', '{']) {
        return problem(
            pos,
            format!("{message} (inside `[...]` or `{{...}}`, a value with `${{VAR}}` must be quoted: \"${{VAR}}\")"),
        );
    }
    problem(pos, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "N" => Some("2".into()),
            "EVIL" => Some("x\ny: 1".into()),
            _ => None,
        }
    }

    fn parse(s: &str) -> Result<Node, Problem> {
        build(s, &env)
    }

    fn err(s: &str) -> String {
        let p = parse(s).unwrap_err();
        format!("{}:{}: {}", p.pos.line, p.pos.column, p.message)
    }

    fn scalars(n: &Node, out: &mut Vec<(String, bool)>) {
        match &n.kind {
            Kind::Scalar { text, plain } => out.push((text.clone(), *plain)),
            Kind::Seq(items) => items.iter().for_each(|i| scalars(i, out)),
            Kind::Map(e) => e.iter().for_each(|(k, v)| {
                scalars(k, out);
                scalars(v, out)
            }),
        }
    }

    #[test]
    fn values_expand_inside_scalars() {
        let n = parse("a: ${EVIL}\nb: \"${N}\"\nc: ${N}\nd: x${N}\ne: '$${N}'\n").unwrap();
        let mut s = Vec::new();
        scalars(&n, &mut s);
        let v: Vec<(&str, bool)> = s.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        assert_eq!(
            v,
            [
                ("a", true),
                ("x\ny: 1", true),
                ("b", true),
                ("2", false),
                ("c", true),
                ("2", true),
                ("d", true),
                ("x2", false),
                ("e", true),
                ("${N}", false),
            ]
        );
    }

    #[test]
    fn unset_variable_points_at_the_reference() {
        assert!(
            err("a:\n  b: x ${N} ${NOPE}\n").starts_with("2:13: a.b: Environment variable `NOPE`")
        );
        assert!(err("a: \"${NOPE}\"\n").starts_with("1:5: "));
        assert!(err("a: |\n  one\n  two ${NOPE}\n").starts_with("3:7: "));
    }

    #[test]
    fn duplicate_keys_name_the_first() {
        assert_eq!(
            err("a: 1\nb: 2\na: 3\n"),
            "3:1: Duplicate key `a` (first at 1:1)"
        );
        assert_eq!(
            err("m: {x: 1, x: 2}\n"),
            "1:11: Duplicate key `x` (first at 1:5)"
        );
    }

    #[test]
    fn limits() {
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(err(&deep).contains("nested too deeply"), "{}", err(&deep));
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            let prev = if i == 0 {
                "a".to_string()
            } else {
                format!("l{}", i - 1)
            };
            laughs += &format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n");
        }
        assert!(
            err(&laughs).contains("Profile too large"),
            "{}",
            err(&laughs)
        );
        let big = format!("a: \"{}\"\n", "x".repeat(MAX_SCALAR_BYTES + 1));
        assert!(err(&big).contains("exceeds 65536 bytes"));
    }

    #[test]
    fn refused_shapes() {
        assert_eq!(
            err("a:\n  - {b: \"x\\0y\"}\n"),
            "2:9: a.b: A NUL character is not allowed in a profile value"
        );
        assert!(err("a: !custom x\n").contains("Tag `!custom`"));
        assert!(err("a: !!binary eA==\n").contains("not supported"));
        assert!(err("? [a]\n: b\n").contains("key must be a scalar"));
        assert!(err("a: 1\n---\nb: 2\n").contains("one YAML document"));
        assert_eq!(err("a: [unclosed\n"), "1:4: Unclosed bracket '['");
        let e = err("a: {k: ${N}}\n");
        assert!(e.contains("must be quoted"), "{e}");
    }

    #[test]
    fn merge_keys_join_and_lose_to_written_keys() {
        let n =
            parse("b: &b {x: 1, y: 2}\nc: &c {z: 3, y: 9}\nm:\n  <<: [*b, *c]\n  x: 0\n").unwrap();
        let Kind::Map(top) = &n.kind else { panic!() };
        let mut s = Vec::new();
        scalars(&top[2].1, &mut s);
        let got: Vec<&str> = s.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(got, ["x", "0", "y", "2", "z", "3"]);
        assert!(err("m:\n  <<: 1\n").contains("merge key"));
        // A quoted "<<" is an ordinary key.
        let n = parse("m: {\"<<\": 1}\n").unwrap();
        let mut s = Vec::new();
        scalars(&n, &mut s);
        assert_eq!(s[1].0, "<<");
    }

    #[test]
    fn aliases_copy() {
        let n = parse("a: &x\n  k: ${N}\nb: *x\n").unwrap();
        let mut s = Vec::new();
        scalars(&n, &mut s);
        assert_eq!(s.len(), 6);
        assert_eq!(s[5], ("2".to_string(), true));
    }
}
