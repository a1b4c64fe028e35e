//! Version numbers and constraints, parsed at the edge (profile, catalog, command line).
//!
//! Owns `Version` (numeric, dot-separated, compared field by field: 570.26 < 570.124.06),
//! `Constraint` (a prefix, `= != < <= > >=` joined by commas, `*`) and `VersionSet`
//! (a union of intervals, used for host ranges). Must never know what the versions belong to.

mod constraint;
mod number;
mod set;

pub use constraint::{Constraint, ConstraintError, Op, Term};
pub use number::{Version, VersionError};
pub use set::VersionSet;
