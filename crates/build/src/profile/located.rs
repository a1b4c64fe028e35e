//! `Located<T>`: a profile value with the line and column it was written at.
//!
//! Later stages (resolve, lock) use the position to point errors back into the profile.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};

use super::de::{LOCATED, LOCATED_FIELDS};

#[derive(Clone, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub line: u32,
    pub column: u32,
}

impl<T> Located<T> {
    /// A value that did not come from a file (tests, overlays): position 0:0.
    pub fn synthetic(value: T) -> Self {
        Located {
            value,
            line: 0,
            column: 0,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}@{}:{}", self.value, self.line, self.column)
    }
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Located<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct(LOCATED, LOCATED_FIELDS, LocatedVisitor(PhantomData))
    }
}

/// Reads `line`, `column` and `value` (the profile deserializer answers them in that order;
/// any other self-describing format may give them as a mapping).
struct LocatedVisitor<T>(PhantomData<T>);

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for LocatedVisitor<T> {
    type Value = Located<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located<T>, A::Error> {
        let (mut line, mut column, mut value) = (0, 0, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "line" => line = map.next_value()?,
                "column" => column = map.next_value()?,
                "value" => value = Some(map.next_value()?),
                other => return Err(de::Error::unknown_field(other, LOCATED_FIELDS)),
            }
        }
        let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
        Ok(Located {
            value,
            line,
            column,
        })
    }
}

impl<T: serde::Serialize> serde::Serialize for Located<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}
