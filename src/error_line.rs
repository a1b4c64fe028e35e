//! One-line rendering of an error and its causes (`outer: cause: cause`), shared by both
//! binaries' error reporting. Causes whose text the outer message already holds are skipped.

use std::error::Error;

pub fn chain(e: &dyn Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}
