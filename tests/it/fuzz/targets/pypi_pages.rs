//! Target `pypi_pages`: project pages at the sizes a hostile index serves — thousands of
//! versions, tens of MiB, up to the client's page cap (`MAX_PAGE_BYTES`) — through the same
//! parser and properties as `pypi` ([`super::pypi::check_page`]), under the harness's time and
//! memory oracles.
//!
//! An input is a recipe, so that mutating it stays cheap while the page it makes is large: one
//! byte for the kind (`j` PEP 691 JSON, anything else HTML), four for how many entries
//! (little-endian, at most twice `MAX_FILES` are made), then one entry, repeated with `{i}`
//! replaced by its number; the page stops growing at the cap. Seeds: 8,000 real-looking
//! entries of each kind (the 8,000 versions of issue 33), and pages that fill the cap with
//! entries that are files and with entries that are not.

use arbitrary::{Result, Unstructured};
use gpuimg_pypi::parsers::{MAX_FILES, MAX_PAGE_BYTES};

use crate::fuzz::harness::{Target, Verdict};
use crate::fuzz::mutate;

pub static TARGET: Target = Target {
    name: "pypi_pages",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 12,
};

fn recipe(kind: u8, count: u32, entry: &str) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend(count.to_le_bytes());
    v.extend(entry.as_bytes());
    v
}

fn seeds() -> Vec<Vec<u8>> {
    let h = "ab".repeat(32);
    let real_html = format!(
        "<a href=\"../../f/demo-1.{{i}}-py3-none-any.whl#sha256={h}\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256={h}\">demo-1.{{i}}</a><br/>\n"
    );
    let real_json = format!(
        "{{\"filename\":\"demo-1.{{i}}-py3-none-any.whl\",\"url\":\"/f/demo-1.{{i}}-py3-none-any.whl\",\"hashes\":{{\"sha256\":\"{h}\"}},\"requires-python\":\">=3.8\",\"core-metadata\":{{\"sha256\":\"{h}\"}},\"size\":4096}}"
    );
    let filler = "x".repeat(1000);
    vec![
        recipe(b'h', 8000, &real_html),
        recipe(b'j', 8000, &real_json),
        // More files than a page may list: refused at the cap on files.
        recipe(b'h', u32::MAX, "<a href=d-{i}-py3-none-any.whl>"),
        recipe(
            b'j',
            u32::MAX,
            "{\"filename\":\"d-{i}.whl\",\"url\":\"d-{i}.whl\"}",
        ),
        // Up to the page cap with few files: anchors that are not files, padding.
        recipe(b'h', u32::MAX, &format!("<a id={{i}}>{filler}</a>\n")),
        recipe(
            b'j',
            u32::MAX,
            &format!("{{\"filename\":\"d-{{i}}.whl\",\"url\":\"d.whl\",\"pad\":\"{filler}\"}}"),
        ),
    ]
}

const DICT: &[&[u8]] = &[
    b"{i}",
    b"<a href=",
    b"file:///etc/passwd",
    b"\",\"",
    b"\xff\xff\xff\x7f",
];

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    mutate::text(u, seeds, DICT)
}

/// The page a recipe makes (at most the page cap, as the client reads no more).
fn page(json: bool, count: u32, entry: &[u8]) -> Vec<u8> {
    let cap = MAX_PAGE_BYTES as usize;
    let mut out = Vec::new();
    if json {
        out.extend_from_slice(b"{\"meta\":{\"api-version\":\"1.1\"},\"name\":\"demo\",\"files\":[");
    }
    let marker = b"{i}";
    // Enough entries to pass the cap on files; the cap on bytes bounds the rest.
    for i in 0..count.min(2 * MAX_FILES as u32 + 1) {
        if out.len() >= cap {
            break;
        }
        if json && i > 0 {
            out.push(b',');
        }
        let n = i.to_string();
        let mut rest = entry;
        while let Some(at) = rest.windows(marker.len()).position(|w| w == marker) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(n.as_bytes());
            rest = &rest[at + marker.len()..];
        }
        out.extend_from_slice(rest);
    }
    if json {
        out.extend_from_slice(b"]}");
    }
    out.truncate(cap);
    out
}

fn check(input: &[u8]) -> Verdict {
    if input.len() < 5 {
        return Ok("short");
    }
    // Any other kind byte is HTML: a mutated recipe still makes a page.
    let json = input[0] == b'j';
    let count = u32::from_le_bytes([input[1], input[2], input[3], input[4]]);
    let entry = &input[5..];
    if entry.is_empty() {
        return Ok("empty entry");
    }
    super::pypi::check_page(&page(json, count, entry), json)
}
