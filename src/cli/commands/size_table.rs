//! The text form of `gpuimg inspect --sizes`: the image size, one row per layer (and per
//! component when one spans several layers), per strip class and per owner. Bytes in decimal
//! units; the JSON form (`--sizes --json`) holds the exact numbers.

use gpuimg_build::inspect::{SizeReport, Totals};
use gpuimg_store::byte_size::ByteSize;

/// Owners listed in the table before the rest are summed into one line.
const SHOWN_OWNERS: usize = 25;

fn b(n: u64) -> String {
    ByteSize(n).to_string()
}

/// Left-aligned first column, the rest right-aligned, two spaces apart; with `last_free`, the
/// last column is left-aligned and unpadded (a long owner name does not widen the table).
fn table(head: &[&str], rows: &[Vec<String>], last_free: bool) -> String {
    let mut width = vec![0usize; head.len()];
    let free = if last_free {
        head.len() - 1
    } else {
        head.len()
    };
    for r in rows.iter().chain(std::iter::once(
        &head.iter().map(|h| h.to_string()).collect(),
    )) {
        for (w, c) in width.iter_mut().zip(r).take(free) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(&width).enumerate() {
            if i == 0 {
                line.push_str(&format!("{c:<w$}"));
            } else if i == free {
                line.push_str(&format!("  {c}"));
            } else {
                line.push_str(&format!("  {c:>w$}"));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

fn totals_row(name: String, t: &Totals) -> Vec<String> {
    vec![
        name,
        b(t.compressed),
        t.uncompressed.map_or_else(|| "?".into(), b),
        b(t.files.before),
        b(t.files.after),
        b(t.stripped.bytes),
        format!("{} ({})", b(t.duplicates.bytes), t.duplicates.entries),
    ]
}

const TOTALS_HEAD: [&str; 7] = [
    "",
    "COMPRESSED",
    "TAR",
    "FILES BEFORE",
    "FILES AFTER",
    "STRIPPED",
    "STORED ONCE",
];

/// The whole report as text.
pub fn render(r: &SizeReport) -> String {
    let mut s = format!(
        "image:  {} ({} bytes: manifest, config and {} {})\n\n",
        b(r.image_size),
        r.image_size,
        r.layers.len(),
        if r.layers.len() == 1 {
            "layer"
        } else {
            "layers"
        }
    );
    let mut rows: Vec<Vec<String>> = r
        .layers
        .iter()
        .map(|l| {
            let hex: String = l
                .digest
                .trim_start_matches("sha256:")
                .chars()
                .take(12)
                .collect();
            let name = format!(
                "{} {}{}",
                l.component.as_deref().unwrap_or("-"),
                hex,
                if l.recorded { "" } else { " (no size record)" }
            );
            totals_row(name, &l.totals)
        })
        .collect();
    rows.push(totals_row("total".into(), &r.total));
    let mut head = TOTALS_HEAD;
    head[0] = "LAYER";
    s.push_str(&table(&head, &rows, false));
    if r.components.len() < r.layers.len() {
        let rows: Vec<Vec<String>> = r
            .components
            .iter()
            .map(|c| totals_row(c.component.clone(), &c.totals))
            .collect();
        head[0] = "COMPONENT";
        s.push('\n');
        s.push_str(&table(&head, &rows, false));
    }
    if !r.strip_classes.is_empty() {
        let rows: Vec<Vec<String>> = r
            .strip_classes
            .iter()
            .map(|(c, n)| vec![c.clone(), n.entries.to_string(), b(n.bytes)])
            .collect();
        s.push('\n');
        s.push_str(&table(&["STRIP CLASS", "ENTRIES", "REMOVED"], &rows, false));
    }
    if !r.device_code.is_empty() {
        let rows: Vec<Vec<String>> = r
            .device_code
            .iter()
            .map(|(lib, n)| vec![n.entries.to_string(), b(n.bytes), lib.clone()])
            .collect();
        s.push('\n');
        s.push_str(&table(
            &["DEVICE CODE ENTRIES", "ZEROED", "LIBRARY"],
            &rows,
            true,
        ));
    }
    if !r.owners.is_empty() {
        let mut rows: Vec<Vec<String>> = r
            .owners
            .iter()
            .take(SHOWN_OWNERS)
            .map(|o| {
                vec![
                    o.component.clone().unwrap_or_else(|| "-".into()),
                    b(o.before),
                    b(o.after),
                    o.owner.clone(),
                ]
            })
            .collect();
        let rest = &r.owners[r.owners.len().min(SHOWN_OWNERS)..];
        if !rest.is_empty() {
            rows.push(vec![
                String::new(),
                b(rest.iter().map(|o| o.before).fold(0, u64::saturating_add)),
                b(rest.iter().map(|o| o.after).fold(0, u64::saturating_add)),
                format!("({} more)", rest.len()),
            ]);
        }
        s.push('\n');
        s.push_str(&table(&["LAYER", "BEFORE", "AFTER", "OWNER"], &rows, true));
    }
    s
}
