//! Error messages compared whole: [`assert_error`] holds a message (a binary's stderr, an error
//! chain) against a reviewed snapshot in `tests/it/snapshots/`, named after the running test
//! (`it__<module>__<test>`, then `-2`, `-3`… for its later calls), after [`redact`] replaced
//! what differs from run to run. A change of wording fails the test; review it with
//! `INSTA_UPDATE=new cargo test --test it <module>::` and the `.snap.new` files beside them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

/// `text` with what varies between runs replaced: each of `dirs` (and its canonical form) by
/// `[TMP<i>]`, any other temporary directory (`/tmp/.tmpXXXXXX`) by `[TMP]`, the directory of
/// the built binaries by `[BIN]`, a loopback port (`127.0.0.1:PORT`, `localhost:PORT`) by
/// `[PORT]`, a process id (`pid N`, `/proc/N/`) by `[PID]`, a sha256 (64 hex digits) by
/// `[SHA256]` (fixtures built from the host's files differ between hosts), and a JSON parser's
/// position (`column N`) by `column [N]` (a fixture lock's length follows the catalog).
pub fn redact(text: &str, dirs: &[&Path]) -> String {
    let mut s = text.to_string();
    if let Some(bin) = super::Bin::Gpuimg.path().parent() {
        s = s.replace(&bin.display().to_string(), "[BIN]");
    }
    for (i, d) in dirs.iter().enumerate() {
        let mark = if dirs.len() == 1 {
            "[TMP]".to_string()
        } else {
            format!("[TMP{i}]")
        };
        if let Ok(c) = d.canonicalize() {
            s = s.replace(&c.display().to_string(), &mark);
        }
        s = s.replace(&d.display().to_string(), &mark);
    }
    s = replace_after(
        &s,
        "/tmp/.tmp",
        6,
        |c| c.is_ascii_alphanumeric(),
        "[TMP]",
        true,
    );
    for host in ["127.0.0.1:", "localhost:"] {
        s = replace_after(&s, host, 0, |c| c.is_ascii_digit(), "[PORT]", false);
    }
    s = replace_after(&s, "/proc/", 0, |c| c.is_ascii_digit(), "[PID]", false);
    s = replace_after(&s, "column ", 0, |c| c.is_ascii_digit(), "[N]", false);
    s = sha256s(&s);
    replace_after(&s, "pid ", 0, |c| c.is_ascii_digit(), "[PID]", false)
}

/// Every run of exactly 64 hex digits replaced by `[SHA256]`.
fn sha256s(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() == 64 {
            out.push_str("[SHA256]");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in s.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Each `prefix` followed by characters `keep` accepts (exactly `n` of them, or one or more
/// when `n` is 0): the prefix and those characters when `whole`, else only the characters,
/// replaced by `mark`.
fn replace_after(
    s: &str,
    prefix: &str,
    n: usize,
    keep: impl Fn(char) -> bool,
    mark: &str,
    whole: bool,
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let len: usize = after
            .chars()
            .take_while(|c| keep(*c))
            .map(char::len_utf8)
            .sum();
        let ok = if n == 0 { len > 0 } else { len >= n };
        let len = if n == 0 { len } else { len.min(n) };
        out.push_str(&rest[..i]);
        if ok {
            if !whole {
                out.push_str(prefix);
            }
            out.push_str(mark);
            rest = &after[len..];
        } else {
            out.push_str(prefix);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

thread_local! {
    /// Calls of [`assert_error`] so far on this thread, by test.
    static CALLS: RefCell<BTreeMap<String, usize>> = const { RefCell::new(BTreeMap::new()) };
}

/// The one line of `text` that holds `needle` (a warning among a build's progress lines), for
/// [`assert_error`] to compare whole.
#[track_caller]
pub fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "lines with `{needle}`: {text}");
    lines[0]
}

/// The lines of `text` that start with `warning: ` (a build's warnings among its progress
/// lines), for [`assert_error`] to compare whole.
pub fn warnings(text: &str) -> String {
    let mut w: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    w.push("");
    w.join("\n")
}

/// `text` with every number of four digits or more (a word of digits only: not the digits of
/// a hash) replaced by `[N]`: for messages that state the sizes of layers made from the host's
/// own files (`busybox`), which differ between hosts.
pub fn without_sizes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let number = word.len() >= 4 && word.chars().all(|c| c.is_ascii_digit());
        out.push_str(if number { "[N]" } else { word });
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Assert that `text`, redacted for `dirs`, equals the running test's next error snapshot:
/// from its first line that starts with `error: ` on, when it has one (what a build printed
/// before failing, its progress, is not the message). The test harness runs each test on a
/// thread named after it, which names the snapshot.
#[track_caller]
pub fn assert_error(text: &str, dirs: &[&Path]) {
    let text = match text.find("error: ") {
        Some(i) if i == 0 || text[..i].ends_with('\n') => &text[i..],
        _ => text,
    };
    let test = std::thread::current()
        .name()
        .expect("a test runs on a thread named after it")
        .to_string();
    let n = CALLS.with(|c| {
        let mut c = c.borrow_mut();
        let n = c.entry(test.clone()).or_default();
        *n += 1;
        *n
    });
    let mut name = format!("it__{}", test.replace("::", "__"));
    if n > 1 {
        name.push_str(&format!("-{n}"));
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let text = redact(text, dirs);
    settings.bind(|| insta::assert_snapshot!(name, text));
}
