//! Target `pypi`: what a Python package index sends — project pages (PEP 503 HTML and PEP 691
//! JSON, `gpuimg_pypi::parsers::parse_page`), core metadata (`parse_metadata`) and a wheel's
//! zip directory read by ranges (`zip_metadata`).
//!
//! An input is one byte choosing the parser, then its bytes. Seeds are built in memory: a page
//! of each kind with every attribute the client reads, a METADATA file, and wheels whose
//! METADATA is stored or deflated; half the mutations of a wheel are directory edits
//! (`zip_edit`: end records claiming millions of entries or gigabytes of directory, an entry
//! repeated or renamed to another's name). Properties ([`check_page`], shared with
//! `pypi_pages`): every file a page yields has an absolute URL without a fragment and a
//! non-empty name, a web page's files are on the web (never `file:`), a page yields at most
//! `MAX_FILES` files and what it yields is linear in its size; a wheel's METADATA is never
//! larger than the cap, every range the reader asks for lies inside the file and is no longer
//! than the directory cap, and a wheel whose directory names a path twice yields no METADATA.

use std::io::Write as _;

use arbitrary::{Result, Unstructured};
use gpuimg_pypi::parsers::{
    parse_metadata, parse_page, zip_metadata, Ranged, JSON, MAX_FILES, MAX_METADATA_BYTES,
};

/// The most directory bytes the reader may ask for at once (`zipdir::MAX_DIRECTORY_BYTES`).
const MAX_DIRECTORY_BYTES: u64 = 64 << 20;

use crate::fuzz::harness::{Target, Verdict};
use crate::fuzz::mutate;

pub static TARGET: Target = Target {
    name: "pypi",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 6_000,
};

const HTML: u8 = b'h';
const JSON_PAGE: u8 = b'j';
const META: u8 = b'm';
const ZIP: u8 = b'z';

const METADATA: &str = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Python: >=3.8\nRequires-Dist: idna<4,>=2.5\nRequires-Dist: socks; extra == 'x'\n\nbody\n";

/// A zip of `(name, bytes, deflate)` members.
fn zip(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data, deflate) in members {
        let body = if *deflate {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        } else {
            data.to_vec()
        };
        let method: u16 = if *deflate { 8 } else { 0 };
        let offset = out.len() as u32;
        let head = |sig: [u8; 4], central: bool| {
            let mut h = sig.to_vec();
            if central {
                h.extend([20, 0]);
            }
            h.extend([20, 0, 0, 0]);
            h.extend(method.to_le_bytes());
            h.extend([0u8; 4]);
            h.extend(crc32fast::hash(data).to_le_bytes());
            h.extend((body.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend(0u16.to_le_bytes());
            if central {
                h.extend([0u8; 10]);
                h.extend(offset.to_le_bytes());
            }
            h.extend(name.as_bytes());
            h
        };
        out.extend(head([0x50, 0x4b, 0x03, 0x04], false));
        out.extend(&body);
        central.extend(head([0x50, 0x4b, 0x01, 0x02], true));
    }
    let at = out.len() as u32;
    out.extend(&central);
    out.extend([0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
    out.extend((members.len() as u16).to_le_bytes());
    out.extend((members.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(at.to_le_bytes());
    out.extend([0, 0]);
    out
}

fn tagged(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(body);
    v
}

fn seeds() -> Vec<Vec<u8>> {
    let h = "ab".repeat(32);
    let html = format!(
        "<html><body>\n<a href=\"../../f/demo-1.0-py3-none-any.whl#sha256={h}\" data-requires-python=\"&gt;=3.8\" data-core-metadata=\"sha256={h}\" data-yanked=\"bad &amp; old\">demo</a>\n<A HREF='demo-0.9.tar.gz'>x</A></body></html>"
    );
    let json = format!(
        "{{\"meta\":{{\"api-version\":\"1.1\"}},\"name\":\"demo\",\"files\":[{{\"filename\":\"demo-1.0-py3-none-any.whl\",\"url\":\"/f/demo-1.0-py3-none-any.whl#x\",\"hashes\":{{\"sha256\":\"{h}\"}},\"requires-python\":\">=3.9\",\"core-metadata\":{{\"sha256\":\"{h}\"}},\"size\":12,\"yanked\":\"why\"}}]}}"
    );
    let pad = vec![b'#'; 70_000];
    vec![
        tagged(HTML, html.as_bytes()),
        tagged(JSON_PAGE, json.as_bytes()),
        tagged(META, METADATA.as_bytes()),
        tagged(
            ZIP,
            &zip(&[
                ("demo/__init__.py", b"", false),
                ("demo-1.0.dist-info/METADATA", METADATA.as_bytes(), true),
            ]),
        ),
        tagged(
            ZIP,
            &zip(&[
                ("demo-1.0.dist-info/METADATA", METADATA.as_bytes(), false),
                ("demo/pad.txt", &pad, false),
            ]),
        ),
    ]
}

const DICT: &[&[u8]] = &[
    b"<a ",
    b"href=",
    b"\"",
    b"'",
    b">",
    b"#sha256=",
    b"data-yanked",
    b"data-core-metadata=\"true\"",
    b"&#x41;",
    b"&gt;",
    b"\"url\":",
    b"\"core-metadata\":true",
    b"Requires-Dist: ",
    b"\n  ",
    b"; extra == ",
    b"PK\x05\x06",
    b"PK\x06\x06",
    b"PK\x06\x07",
    b"\xff\xff\xff\xff",
];

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let seed = mutate::pick_seed(u, seeds)?;
    if seed.first() == Some(&ZIP) && u.ratio(1, 2)? {
        return Ok(tagged(ZIP, &crate::fuzz::zip_edit::edit(u, &seed[1..])?));
    }
    mutate::text(u, seeds, DICT)
}

/// A file held in memory that checks every range asked of it.
struct Mem<'a>(&'a [u8], Option<String>);

impl Ranged for Mem<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read(&mut self, start: u64, len: u64) -> std::result::Result<Vec<u8>, String> {
        if len > MAX_DIRECTORY_BYTES {
            self.1 = Some(format!("a read of {len} bytes"));
            return Err("too long".into());
        }
        match start.checked_add(len) {
            Some(end) if end <= self.0.len() as u64 => {
                Ok(self.0[start as usize..end as usize].to_vec())
            }
            _ => {
                self.1 = Some(format!(
                    "read {start}+{len} of a {}-byte file",
                    self.0.len()
                ));
                Err("out of range".into())
            }
        }
    }
}

/// Parse a project page (JSON or HTML) served over HTTPS and check what it yields.
pub fn check_page(body: &[u8], json: bool) -> Verdict {
    let base = url::Url::parse("https://index.invalid/simple/demo/").map_err(|e| e.to_string())?;
    let ct = json.then_some(JSON);
    let Ok(files) = parse_page(body, ct, &base) else {
        return Ok("refused");
    };
    if files.len() > MAX_FILES {
        return Err(format!("{} files, over the cap", files.len()));
    }
    let mut held = 0usize;
    for f in &files {
        let u = url::Url::parse(&f.url).map_err(|e| format!("{}: {e}", f.url))?;
        if u.fragment().is_some() || f.filename.is_empty() {
            return Err(format!("a file with a fragment or no name: {f:?}"));
        }
        if !matches!(u.scheme(), "http" | "https") {
            return Err(format!(
                "a web page names a `{}` file: {}",
                u.scheme(),
                f.url
            ));
        }
        held += f.url.len() + f.filename.len() + f.yanked.as_ref().map_or(0, String::len);
    }
    // Percent-encoding at most triples a byte; each file may repeat the base.
    let bound = 8 * body.len() + files.len() * 2 * base.as_str().len();
    if held > bound {
        return Err(format!(
            "{held} bytes of files from a {}-byte page",
            body.len()
        ));
    }
    Ok(if files.is_empty() {
        "no files"
    } else {
        "files"
    })
}

fn check(input: &[u8]) -> Verdict {
    let Some((&tag, body)) = input.split_first() else {
        return Ok("empty");
    };
    match tag {
        HTML | JSON_PAGE => check_page(body, tag == JSON_PAGE),
        META => Ok(match parse_metadata(body) {
            Ok(_) => "accepted",
            Err(_) => "refused",
        }),
        ZIP => {
            let mut m = Mem(body, None);
            let r = zip_metadata(&mut m);
            if let Some(bad) = m.1 {
                return Err(bad);
            }
            let mut names = crate::fuzz::zip_edit::names(body);
            for n in &mut names {
                while n.last() == Some(&b'/') {
                    n.pop();
                }
            }
            names.sort_unstable();
            let twice = names.windows(2).any(|w| w[0] == w[1]);
            match r {
                Ok(meta) if meta.len() as u64 > MAX_METADATA_BYTES => {
                    Err(format!("{} bytes of METADATA", meta.len()))
                }
                Ok(_) if twice => Err("METADATA from a directory naming a path twice".into()),
                Ok(_) => Ok("accepted"),
                Err(_) => Ok("refused"),
            }
        }
        _ => Ok("unknown kind"),
    }
}
