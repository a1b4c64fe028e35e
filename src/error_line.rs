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

/// One line for a panic in binary `who`: the message and where, never a stack trace.
pub fn panic_line(who: &str, info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    let msg = msg.replace('\n', " ");
    match info.location() {
        Some(l) => format!(
            "error: internal error in {who} (please report it): {msg} (at {}:{})",
            l.file(),
            l.line()
        ),
        None => format!("error: internal error in {who} (please report it): {msg}"),
    }
}
