//! A serde deserializer over the positioned node tree (`node.rs`).
//!
//! The target type decides how a plain scalar is read (YAML core schema: `2` is an integer
//! for a number field and the text "2" for a string field); quoted scalars are strings.
//! Every error carries the line, column and key path of the node it is about.
//! `Located<T>` asks for its position through the `LOCATED` struct name.

use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, U32Deserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, Unexpected, Visitor};

use super::node::{Kind, Node, Pos};

/// Struct name `Located<T>` deserializes through; answered with `line`, `column`, `value`.
pub(super) const LOCATED: &str = "$gpuimg::Located";
pub(super) const LOCATED_FIELDS: &[&str] = &["line", "column", "value"];

#[derive(Debug)]
pub(super) struct DeError {
    pub message: String,
    pub pos: Option<Pos>,
    /// Dotted key path of the value (`selftest.enabled`); none for errors about a key.
    pub path: Option<String>,
}

impl DeError {
    /// The message in the profile's words: serde's `struct ConfigSpec`, `u32` name Rust types.
    pub fn message(&self) -> String {
        let m = &self.message;
        let Some(i) = m.find("expected ") else {
            return m.clone();
        };
        let (head, want) = m.split_at(i + "expected ".len());
        let want = match want {
            w if w.starts_with("struct ") => "a mapping of keys",
            w if w.starts_with("enum ") => "a name",
            "u8" | "u16" | "u32" | "u64" => "a whole number (0 or more)",
            "f32" | "f64" => "a number",
            w => w,
        };
        format!("{head}{want}")
    }

    fn at(mut self, pos: Pos, path: &str) -> Self {
        if self.pos.is_none() {
            self.pos = Some(pos);
            self.path = (!path.is_empty()).then(|| path.to_string());
        }
        self
    }
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            pos: None,
            path: None,
        }
    }

    /// An unknown key, with the nearest known one when one is close (a typo), then the list.
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let near = expected
            .iter()
            .map(|k| (strsim::damerau_levenshtein(field, k), *k))
            .filter(|(d, k)| *d <= 2.max(k.len() / 3))
            .min()
            .map(|(_, k)| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        let known = match expected {
            [] => "there are no fields".to_string(),
            [one] => format!("expected `{one}`"),
            many => format!(
                "expected one of {}",
                many.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        // serde's own wording, with the suggestion after the key.
        de::Error::custom(format!("unknown field `{field}`{near}, {known}"))
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

/// Deserialize `T` from the tree.
pub(super) fn from_node<'de, T: de::Deserialize<'de>>(node: &Node) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: String::new(),
    })
}

struct NodeDe<'a> {
    node: &'a Node,
    path: String,
}

/// A plain scalar typed by the YAML 1.2 core schema.
enum Typed<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(&'a str),
}

fn type_plain(s: &str) -> Typed<'_> {
    if matches!(s, "" | "~" | "null" | "Null" | "NULL") {
        return Typed::Null;
    }
    if let Some(b) = parse_bool(s) {
        return Typed::Bool(b);
    }
    if let Some(i) = parse_int(s) {
        return Typed::Int(i);
    }
    if let Some(f) = parse_float(s) {
        return Typed::Float(f);
    }
    Typed::Str(s)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

fn parse_yaml11_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "on" => Some(true),
        "false" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}

fn parse_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0o") {
        (8, d)
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i128::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

fn parse_float(s: &str) -> Option<f64> {
    let t = s.trim_start_matches(['-', '+']);
    if matches!(t, ".inf" | ".Inf" | ".INF") {
        return Some(if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if matches!(s, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    // Digits, at most one dot, an optional exponent: no `inf`, `NaN` or `1_0` spellings.
    let (mantissa, exponent) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let digits = mantissa.replacen('.', "", 1);
    let exp_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) || !exp_ok {
        return None;
    }
    s.parse().ok()
}

impl<'a> NodeDe<'a> {
    fn scalar(&self) -> Option<(&'a str, bool)> {
        match &self.node.kind {
            Kind::Scalar { text, plain } => Some((text.as_str(), *plain)),
            _ => None,
        }
    }

    fn typed(&self) -> Option<Typed<'a>> {
        match self.scalar()? {
            (text, true) => Some(type_plain(text)),
            (text, false) => Some(Typed::Str(text)),
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.typed(), Some(Typed::Null))
    }

    fn unexpected(&self) -> Unexpected<'a> {
        match (&self.node.kind, self.typed()) {
            (Kind::Seq(_), _) => Unexpected::Seq,
            (Kind::Map(_), _) => Unexpected::Map,
            (_, Some(Typed::Null)) => Unexpected::Unit,
            (_, Some(Typed::Bool(b))) => Unexpected::Bool(b),
            (_, Some(Typed::Int(i))) => match i64::try_from(i) {
                Ok(i) => Unexpected::Signed(i),
                Err(_) => Unexpected::Other("a large integer"),
            },
            (_, Some(Typed::Float(f))) => Unexpected::Float(f),
            (_, Some(Typed::Str(s))) => Unexpected::Str(s),
            (_, None) => Unexpected::Other("a value"),
        }
    }

    fn fail<T>(&self, exp: &dyn de::Expected) -> Result<T, DeError> {
        Err(de::Error::invalid_type(self.unexpected(), exp))
    }

    fn int(&self) -> Option<i128> {
        match self.typed()? {
            Typed::Int(i) => Some(i),
            _ => None,
        }
    }

    fn child(&self, node: &'a Node, key: Option<&str>) -> NodeDe<'a> {
        let path = match key {
            None => self.path.clone(),
            Some(k) if self.path.is_empty() => k.to_string(),
            Some(k) => format!("{}.{k}", self.path),
        };
        NodeDe { node, path }
    }

    fn finish<T>(&self, r: Result<T, DeError>) -> Result<T, DeError> {
        r.map_err(|e| e.at(self.node.pos, &self.path))
    }
}

macro_rules! int_methods {
    ($($method:ident $visit:ident $ty:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let r = match self.int() {
                Some(i) => match <$ty>::try_from(i) {
                    Ok(v) => visitor.$visit(v),
                    Err(_) => Err(de::Error::invalid_value(self.unexpected(), &visitor)),
                },
                None => self.fail(&visitor),
            };
            self.finish(r)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match &self.node.kind {
            Kind::Seq(_) => self.deserialize_seq_inner(visitor),
            Kind::Map(_) => self.deserialize_map_inner(visitor),
            Kind::Scalar { text, .. } => match self.typed() {
                Some(Typed::Null) => visitor.visit_unit(),
                Some(Typed::Bool(b)) => visitor.visit_bool(b),
                Some(Typed::Int(i)) => match i64::try_from(i) {
                    Ok(v) => visitor.visit_i64(v),
                    Err(_) => visitor.visit_i128(i),
                },
                Some(Typed::Float(f)) => visitor.visit_f64(f),
                _ => visitor.visit_str(text),
            },
        };
        self.finish(r)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // YAML 1.1's spellings too (`yes`, `off`), as profiles written for serde-saphyr use them.
        let r = match self.scalar() {
            Some((text, true)) => match parse_bool(text).or_else(|| parse_yaml11_bool(text)) {
                Some(b) => visitor.visit_bool(b),
                None => self.fail(&visitor),
            },
            _ => self.fail(&visitor),
        };
        self.finish(r)
    }

    int_methods!(
        deserialize_i8 visit_i8 i8, deserialize_i16 visit_i16 i16,
        deserialize_i32 visit_i32 i32, deserialize_i64 visit_i64 i64,
        deserialize_i128 visit_i128 i128, deserialize_u8 visit_u8 u8,
        deserialize_u16 visit_u16 u16, deserialize_u32 visit_u32 u32,
        deserialize_u64 visit_u64 u64, deserialize_u128 visit_u128 u128
    );

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = match self.typed() {
            Some(Typed::Float(f)) => visitor.visit_f64(f),
            Some(Typed::Int(i)) => visitor.visit_f64(i as f64),
            _ => self.fail(&visitor),
        };
        self.finish(r)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // A plain scalar reads as its text whatever it would type as (`cuda: 12.4`), except
        // null: an empty value is not a string.
        let r = match self.scalar() {
            Some(_) if self.is_null() => self.fail(&visitor),
            Some((text, _)) => visitor.visit_str(text),
            None => self.fail(&visitor),
        };
        self.finish(r)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.is_null() {
            let r = visitor.visit_none();
            return self.finish(r);
        }
        let (pos, path) = (self.node.pos, self.path.clone());
        visitor.visit_some(self).map_err(|e| e.at(pos, &path))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = if self.is_null() {
            visitor.visit_unit()
        } else {
            self.fail(&visitor)
        };
        self.finish(r)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let (pos, path) = (self.node.pos, self.path.clone());
        visitor
            .visit_newtype_struct(self)
            .map_err(|e| e.at(pos, &path))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = self.deserialize_seq_inner(visitor);
        self.finish(r)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let r = self.deserialize_map_inner(visitor);
        self.finish(r)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if name == LOCATED {
            return visitor.visit_map(LocatedAccess { de: self, next: 0 });
        }
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let r = match self.scalar() {
            Some((text, _)) if !self.is_null() => {
                visitor.visit_enum(IntoDeserializer::<DeError>::into_deserializer(text))
            }
            _ => self.fail(&visitor),
        };
        self.finish(r)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

impl<'a> NodeDe<'a> {
    fn deserialize_seq_inner<'de, V: Visitor<'de>>(&self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            Kind::Seq(items) => visitor.visit_seq(SeqAccess {
                parent: self,
                items: items.iter(),
            }),
            // A key with every item commented out is an empty list.
            _ if self.is_null() => visitor.visit_seq(SeqAccess {
                parent: self,
                items: [].iter(),
            }),
            _ => self.fail(&visitor),
        }
    }

    fn deserialize_map_inner<'de, V: Visitor<'de>>(&self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            Kind::Map(entries) => visitor.visit_map(MapAccess {
                parent: self,
                entries: entries.iter(),
                value: None,
            }),
            // A key with every entry commented out is an empty mapping.
            _ if self.is_null() => visitor.visit_map(MapAccess {
                parent: self,
                entries: [].iter(),
                value: None,
            }),
            _ => self.fail(&visitor),
        }
    }
}

struct SeqAccess<'p, 'a> {
    parent: &'p NodeDe<'a>,
    items: std::slice::Iter<'a, Node>,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            Some(item) => seed.deserialize(self.parent.child(item, None)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapAccess<'p, 'a> {
    parent: &'p NodeDe<'a>,
    entries: std::slice::Iter<'a, (Node, Node)>,
    value: Option<(&'a Node, &'a str)>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((k, v)) = self.entries.next() else {
            return Ok(None);
        };
        let name = match &k.kind {
            Kind::Scalar { text, .. } => text.as_str(),
            _ => "",
        };
        self.value = Some((v, name));
        let key = NodeDe {
            node: k,
            path: String::new(),
        };
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some((v, name)) = self.value.take() else {
            return Err(de::Error::custom("value asked before its key"));
        };
        seed.deserialize(self.parent.child(v, Some(name)))
    }
}

/// Answers `Located<T>`: its line, column, then the value itself.
struct LocatedAccess<'a> {
    de: NodeDe<'a>,
    next: usize,
}

impl<'de> de::MapAccess<'de> for LocatedAccess<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match LOCATED_FIELDS.get(self.next) {
            Some(f) => seed.deserialize(BorrowedStrDeserializer::new(f)).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let pos = self.de.node.pos;
        self.next += 1;
        match self.next {
            1 => seed.deserialize(U32Deserializer::new(pos.line)),
            2 => seed.deserialize(U32Deserializer::new(pos.column)),
            _ => seed.deserialize(NodeDe {
                node: self.de.node,
                path: self.de.path.clone(),
            }),
        }
    }
}
