//! Tests of split.
