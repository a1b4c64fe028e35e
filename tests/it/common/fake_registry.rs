//! A hostile registry for the push tests: a loopback HTTP/1.1 server (on any 127.x.y.z address,
//! so that a test has several hosts) whose answer to each request the test's handler chooses —
//! a status with headers and a body, silence (the request is read and never answered), or a
//! head at once and a body dripped one byte at a time, in step with the client's manual clock
//! (`gpuimg_fetch::ManualClock`: each byte costs the clock a set time, no real time) — and
//! which logs every request (method,
//! target, headers). One request per connection (`Connection: close`); anything that does not
//! start like an HTTP request (a TLS hello) is hung up on at once. A registry made with
//! [`FakeRegistry::swallowing`] never reads the body of the requests it picks (an upload that
//! stalls). Stopped when dropped: a silent answer waits for that, not for a time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use gpuimg_fetch::ManualClock;

/// Set when the registry is dropped; silent answers wait on it.
#[derive(Default)]
struct Stop {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Stop {
    fn is_set(&self) -> bool {
        *self.set.lock().unwrap()
    }

    fn set(&self) {
        *self.set.lock().unwrap() = true;
        self.changed.notify_all();
    }

    fn wait(&self) {
        let s = self.set.lock().unwrap();
        drop(self.changed.wait_while(s, |set| !*set).unwrap());
    }
}

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// How the server answers one request.
#[derive(Clone, Debug)]
pub enum Answer {
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Read the request and never answer (until the server is dropped).
    Silent,
    /// The head (with a Content-Length of `len`) at once, then one byte every `every` of
    /// `clock`'s time, each once the client read the clock after the byte before.
    Drip {
        status: u16,
        len: usize,
        every: Duration,
        clock: &'static ManualClock,
    },
}

impl Answer {
    pub fn status(status: u16) -> Answer {
        Answer::Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn body(status: u16, body: impl Into<Vec<u8>>) -> Answer {
        Answer::Reply {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Answer {
        if let Answer::Reply { headers, .. } = &mut self {
            headers.push((name.to_string(), value.into()));
        }
        self
    }
}

type Handler = dyn Fn(&Req) -> Answer + Send + Sync;
type Picks = dyn Fn(&Req) -> bool + Send + Sync;

pub struct FakeRegistry {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Req>>>,
    stop: Arc<Stop>,
}

impl FakeRegistry {
    /// Serve on `ip` (`127.0.0.1`, `127.0.0.2`, …), a free port, answering with `handler`.
    pub fn start(ip: &str, handler: impl Fn(&Req) -> Answer + Send + Sync + 'static) -> Self {
        Self::swallowing(ip, handler, |_| false)
    }

    /// As [`FakeRegistry::start`], but a request `swallow` picks (seen with its body unread)
    /// never has its body read nor an answer: the client's upload stalls.
    pub fn swallowing(
        ip: &str,
        handler: impl Fn(&Req) -> Answer + Send + Sync + 'static,
        swallow: impl Fn(&Req) -> bool + Send + Sync + 'static,
    ) -> Self {
        let listener =
            TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("failed to listen on {ip}: {e}"));
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(Stop::default());
        let handler: Arc<Handler> = Arc::new(handler);
        let swallow: Arc<Picks> = Arc::new(swallow);
        let (log2, stop2) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.is_set() {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (log, stop) = (log2.clone(), stop2.clone());
                let (handler, swallow) = (handler.clone(), swallow.clone());
                std::thread::spawn(move || answer_one(conn, &*handler, &*swallow, &log, &stop));
            }
        });
        FakeRegistry { addr, log, stop }
    }

    /// `IP:PORT`: the registry part of a reference, or a realm's authority.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// `http://IP:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in the order they were read.
    pub fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    /// The requests so far, one line each (for failure messages).
    pub fn describe(&self) -> String {
        self.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.stop.set();
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
    }
}

fn answer_one(
    conn: TcpStream,
    handler: &Handler,
    swallow: &Picks,
    log: &Mutex<Vec<Req>>,
    stop: &Stop,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut r = BufReader::new(conn);
    let Ok(first) = r.fill_buf() else { return };
    if !first.first().is_some_and(u8::is_ascii_uppercase) {
        return;
    }
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let mut words = line.split_whitespace();
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return;
    };
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut req = Req {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if swallow(&req) {
        log.lock().unwrap().push(req);
        stop.wait();
        return;
    }
    req.body = vec![0u8; len];
    if r.read_exact(&mut req.body).is_err() {
        return;
    }
    log.lock().unwrap().push(req.clone());
    let head = |status: u16, headers: &[(String, String)], len: usize| {
        let mut h =
            format!("HTTP/1.1 {status} Fake\r\nContent-Length: {len}\r\nConnection: close\r\n");
        for (k, v) in headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        h
    };
    match handler(&req) {
        Answer::Reply {
            status,
            headers,
            body,
        } => {
            let len = if req.method == "HEAD" && body.is_empty() {
                0
            } else {
                body.len()
            };
            let _ = out.write_all(head(status, &headers, len).as_bytes());
            if req.method != "HEAD" {
                let _ = out.write_all(&body);
            }
        }
        Answer::Silent => stop.wait(),
        Answer::Drip {
            status,
            len,
            every,
            clock,
        } => {
            if out.write_all(head(status, &[], len).as_bytes()).is_err() {
                return;
            }
            for _ in 0..len {
                // The limit only ends the wait for a client that went away.
                let sent = clock.advance_in_step(every, Duration::from_secs(10), || {
                    out.write_all(b"x").is_ok()
                });
                if stop.is_set() || !sent {
                    return;
                }
            }
        }
    }
}
