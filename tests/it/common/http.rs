//! A loopback HTTP server for fixture repositories, with faults a hostile or broken mirror
//! shows (truncated, corrupt, endless, dripping, hanging bodies; error statuses), and a count
//! of the requests each path got. Nothing it does takes real time: a drip moves the client's
//! manual clock (`gpuimg_fetch::ManualClock`, given per path with [`Server::pace`]) in step with
//! the client's reads, and a hang lasts until the client hangs up. For Python indexes: a path ending in `/` serves the
//! directory's `index.json` to a client that accepts PEP 691 JSON (else `index.html`), with
//! its media type, and `Range: bytes=...` requests get `206` answers (each recorded).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuimg_fetch::ManualClock;

/// How the server misbehaves for one path.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Send the full Content-Length header but only half the body, then close.
    Truncate,
    /// Flip one byte of the body.
    Corrupt,
    /// The body, then the file again and again forever; no Content-Length (ends at close).
    Endless,
    /// The same endless body, chunked.
    EndlessChunked,
    /// The same endless body, announced with a Content-Length of 10 GB.
    HugeLength,
    /// `n` extra bytes after the body, announced honestly in Content-Length.
    Long(usize),
    /// `n` extra bytes after the body, no Content-Length.
    LongUnannounced(usize),
    /// The body less its last `n` bytes, announced honestly (the server has a shorter file).
    ShortBy(usize),
    /// The full Content-Length, then only the first `n` bytes, then close.
    CloseAfter(usize),
    /// Headers at once, then the body one byte every `ms` milliseconds of the path's clock
    /// ([`Server::pace`]), each once the client read the clock after the byte before.
    Drip(u64),
    /// The first bytes of the response head, then nothing until the client hangs up.
    StallInHead,
    /// Read the request and answer nothing until the client hangs up.
    Hang,
    /// Answer every request with this status.
    Status(u16),
    /// Answer the first `n` requests with `status`, then serve the file.
    StatusFirst(u16, usize),
}

pub struct Server {
    pub url: String,
    pub faults: Arc<Mutex<HashMap<String, Fault>>>,
    /// The client's clock a drip on each path moves.
    pub clocks: Arc<Mutex<HashMap<String, &'static ManualClock>>>,
    pub hits: Arc<Mutex<Vec<String>>>,
    /// `(path, range header)` of every range request.
    pub ranges: Arc<Mutex<Vec<(String, String)>>>,
}

impl Server {
    /// Make `path` (e.g. `/dists/s/InRelease`) misbehave.
    pub fn fault(&self, path: &str, f: Fault) {
        self.faults.lock().unwrap().insert(path.to_string(), f);
    }

    /// A drip on `path` moves `clock` (the one the client's bounds are measured by).
    pub fn pace(&self, path: &str, clock: &'static ManualClock) {
        self.clocks.lock().unwrap().insert(path.to_string(), clock);
    }

    /// The paths whose whole body was asked for (every request without a range).
    pub fn whole_bodies(&self) -> Vec<String> {
        let ranged: Vec<String> = self
            .ranges
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.0.clone())
            .collect();
        let mut whole = self.hits.lock().unwrap().clone();
        for r in ranged {
            if let Some(i) = whole.iter().position(|p| *p == r) {
                whole.remove(i);
            }
        }
        whole
    }

    /// How many requests `path` got.
    pub fn hits_of(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

fn status_line(code: u16) -> String {
    let reason = match code {
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

/// Write `body`, then the file again and again until the client goes away; chunked or not.
fn endless(stream: &mut impl Write, body: &[u8], chunked: bool) {
    let unit: Vec<u8> = if body.is_empty() {
        vec![b'A'; 65536]
    } else {
        body.repeat(65536 / body.len() + 1)
    };
    let frame = |data: &[u8]| -> Vec<u8> {
        if !chunked {
            return data.to_vec();
        }
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    if !body.is_empty() && stream.write_all(&frame(body)).is_err() {
        return;
    }
    let chunk = frame(&unit);
    while stream.write_all(&chunk).is_ok() {}
}

/// Write `body`, then `extra` newlines.
fn padded(stream: &mut impl Write, body: &[u8], extra: usize) {
    let pad = vec![b'\n'; 65536];
    let mut left = extra;
    let mut ok = stream.write_all(body).is_ok();
    while ok && left > 0 {
        let n = left.min(pad.len());
        ok = stream.write_all(&pad[..n]).is_ok();
        left -= n;
    }
}

/// Wait until the client hangs up (or sends more, which a one-request connection never does).
fn until_hangup(stream: &mut std::net::TcpStream) {
    use std::io::Read;
    let _ = stream.read(&mut [0u8; 1]);
}

fn respond(
    stream: &mut std::net::TcpStream,
    mut body: Vec<u8>,
    fault: Option<Fault>,
    nth: usize,
    clock: Option<&'static ManualClock>,
) {
    let ok = |len: &str| format!("HTTP/1.1 200 OK\r\n{len}Connection: close\r\n\r\n");
    let len = body.len();
    let cl = |n: usize| format!("Content-Length: {n}\r\n");
    match fault {
        None | Some(Fault::Corrupt) => {
            if fault.is_some() {
                body[len / 2] ^= 0x55;
            }
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body);
        }
        Some(Fault::Truncate) => {
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body[..len / 2]);
        }
        Some(Fault::CloseAfter(n)) => {
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            let _ = stream.write_all(&body[..n.min(len)]);
        }
        Some(Fault::ShortBy(n)) => {
            let keep = len.saturating_sub(n);
            let _ = stream.write_all(ok(&cl(keep)).as_bytes());
            let _ = stream.write_all(&body[..keep]);
        }
        Some(Fault::Long(n)) => {
            let _ = stream.write_all(ok(&cl(len + n)).as_bytes());
            padded(stream, &body, n);
        }
        Some(Fault::LongUnannounced(n)) => {
            let _ = stream.write_all(ok("").as_bytes());
            padded(stream, &body, n);
        }
        Some(Fault::Endless) => {
            let _ = stream.write_all(ok("").as_bytes());
            endless(stream, &body, false);
        }
        Some(Fault::EndlessChunked) => {
            let _ = stream.write_all(ok("Transfer-Encoding: chunked\r\n").as_bytes());
            endless(stream, &body, true);
        }
        Some(Fault::HugeLength) => {
            let _ = stream.write_all(ok("Content-Length: 10000000000\r\n").as_bytes());
            endless(stream, &body, false);
        }
        Some(Fault::Drip(ms)) => {
            let clock = clock.expect("a dripping path is paced by the client's clock");
            let _ = stream.write_all(ok(&cl(len)).as_bytes());
            for b in &body {
                // The limit only ends the wait for a client that went away.
                let sent = clock.advance_in_step(
                    Duration::from_millis(ms),
                    Duration::from_secs(10),
                    || stream.write_all(&[*b]).is_ok(),
                );
                if !sent {
                    return;
                }
            }
        }
        Some(Fault::StallInHead) => {
            let head = ok(&cl(len));
            if stream.write_all(&head.as_bytes()[..10]).is_ok() {
                until_hangup(stream);
            }
        }
        Some(Fault::Hang) => until_hangup(stream),
        Some(Fault::Status(code)) => {
            let _ = stream.write_all(status_line(code).as_bytes());
        }
        Some(Fault::StatusFirst(code, n)) => {
            if nth <= n {
                let _ = stream.write_all(status_line(code).as_bytes());
            } else {
                respond(stream, body, None, nth, clock);
            }
        }
    }
}

/// Serve `root` on a loopback port until the process ends.
pub fn serve(root: &Path) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let faults: Arc<Mutex<HashMap<String, Fault>>> = Arc::default();
    let clocks: Arc<Mutex<HashMap<String, &'static ManualClock>>> = Arc::default();
    let hits: Arc<Mutex<Vec<String>>> = Arc::default();
    let ranges: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let (root, f2, c2, h2, r2) = (
        root.to_path_buf(),
        faults.clone(),
        clocks.clone(),
        hits.clone(),
        ranges.clone(),
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (root, faults, clocks, hits, ranges) =
                (root.clone(), f2.clone(), c2.clone(), h2.clone(), r2.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                let (mut accept, mut range) = (String::new(), None::<String>);
                loop {
                    let mut l = String::new();
                    if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        match k.trim().to_ascii_lowercase().as_str() {
                            "accept" => accept = v.trim().to_string(),
                            "range" => range = Some(v.trim().to_string()),
                            _ => {}
                        }
                    }
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                let nth = {
                    let mut h = hits.lock().unwrap();
                    h.push(path.clone());
                    h.iter().filter(|p| **p == path).count()
                };
                let fault = faults.lock().unwrap().get(&path).copied();
                let clock = clocks.lock().unwrap().get(&path).copied();
                let mut file = root.join(path.trim_start_matches('/'));
                let mut content_type = None;
                if path.ends_with('/') {
                    let json = file.join("index.json");
                    if accept.contains("application/vnd.pypi.simple.v1+json") && json.is_file() {
                        file = json;
                        content_type = Some("application/vnd.pypi.simple.v1+json");
                    } else {
                        file = file.join("index.html");
                        content_type = Some("text/html; charset=utf-8");
                    }
                }
                if let (Some(r), None, Ok(body)) = (&range, fault, std::fs::read(&file)) {
                    ranges.lock().unwrap().push((path.clone(), r.clone()));
                    partial(&mut stream, &body, r);
                    return;
                }
                if let (Some(ct), None, Ok(body)) = (content_type, fault, std::fs::read(&file)) {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(&body);
                    return;
                }
                match std::fs::read(&file) {
                    Ok(body) => respond(&mut stream, body, fault, nth, clock),
                    // A fault on a path with no file still answers (e.g. a status storm).
                    Err(_) if matches!(fault, Some(Fault::Status(_) | Fault::Hang)) => {
                        respond(&mut stream, Vec::new(), fault, nth, clock)
                    }
                    Err(_) => {
                        let _ = stream.write_all(status_line(404).as_bytes());
                    }
                }
            });
        }
    });
    Server {
        url,
        faults,
        clocks,
        hits,
        ranges,
    }
}

/// A `206` answer to `Range: bytes=A-B`, `bytes=A-` or `bytes=-N` (416 when unsatisfiable).
fn partial(stream: &mut std::net::TcpStream, body: &[u8], range: &str) {
    let len = body.len() as u64;
    let spec = range.trim().strip_prefix("bytes=").unwrap_or("");
    let (start, end) = match spec.split_once('-') {
        Some(("", n)) => match n.parse::<u64>() {
            Ok(n) => (len.saturating_sub(n), len.saturating_sub(1)),
            Err(_) => (1, 0),
        },
        Some((a, "")) => (a.parse().unwrap_or(len), len.saturating_sub(1)),
        Some((a, b)) => (
            a.parse().unwrap_or(len),
            b.parse::<u64>().unwrap_or(0).min(len.saturating_sub(1)),
        ),
        None => (1, 0),
    };
    if len == 0 || start > end || start >= len {
        let _ = stream.write_all(
            format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        return;
    }
    let part = &body[start as usize..=end as usize];
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{end}/{len}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        part.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(part);
}
