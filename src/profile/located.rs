//! `Located<T>`: a profile value with the line and column it was written at.
//!
//! Later stages (resolve, lock) use the position to point errors back into the profile.

use std::fmt;

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
        let s = serde_saphyr::Spanned::<T>::deserialize(d)?;
        Ok(Located {
            line: s.referenced.line() as u32,
            column: s.referenced.column() as u32,
            value: s.value,
        })
    }
}

impl<T: serde::Serialize> serde::Serialize for Located<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}
