//! A loopback TCP proxy that stalls: it forwards every connection to a target (a registry)
//! both ways until `limit` bytes in all have gone client → server, then forwards nothing more
//! from any client (it stops reading, so the client's writes back up) and says so
//! (`is_stalled`, `wait_stalled`). A test kills its client at that moment: mid-body,
//! deterministically. Answers from the server still flow back. Dropping the proxy closes
//! every connection.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct Shared {
    target: String,
    limit: u64,
    /// Bytes forwarded client → server, all connections together.
    forwarded: Mutex<u64>,
    stalled: AtomicBool,
    stalled_cv: Condvar,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

pub struct StallingProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl StallingProxy {
    /// Listen on a free loopback port, forwarding to `target` (`HOST:PORT`) until `limit`
    /// bytes have gone client → server.
    pub fn start(target: &str, limit: u64) -> StallingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            target: target.to_string(),
            limit,
            forwarded: Mutex::new(0),
            stalled: AtomicBool::new(false),
            stalled_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&s.target) else {
                    continue;
                };
                {
                    let mut conns = s.conns.lock().unwrap();
                    conns.push(client.try_clone().unwrap());
                    conns.push(server.try_clone().unwrap());
                }
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let shared = s.clone();
                std::thread::spawn(move || client_to_server(&shared, client, server));
                std::thread::spawn(move || server_to_client(s2, c2));
            }
        });
        StallingProxy {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `127.0.0.1:PORT` of the proxy.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Bytes forwarded client → server so far.
    pub fn forwarded(&self) -> u64 {
        *self.shared.forwarded.lock().unwrap()
    }

    pub fn is_stalled(&self) -> bool {
        self.shared.stalled.load(Ordering::SeqCst)
    }

    /// Wait until the proxy stalls or `timeout` passes; whether it stalled.
    pub fn wait_stalled(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut g = self.shared.forwarded.lock().unwrap();
        while !self.is_stalled() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self.shared.stalled_cv.wait_timeout(g, left).unwrap().0;
        }
        true
    }
}

fn client_to_server(s: &Shared, mut client: TcpStream, mut server: TcpStream) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if s.stalled.load(Ordering::SeqCst) {
            break;
        }
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = server.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        let allow = {
            let mut f = s.forwarded.lock().unwrap();
            let allow = (n as u64).min(s.limit - *f) as usize;
            *f += allow as u64;
            allow
        };
        if allow > 0 && server.write_all(&buf[..allow]).is_err() {
            return;
        }
        if *s.forwarded.lock().unwrap() >= s.limit {
            let _g = s.forwarded.lock().unwrap();
            s.stalled.store(true, Ordering::SeqCst);
            s.stalled_cv.notify_all();
            break;
        }
    }
    // Stalled: read nothing more from this client until the proxy is dropped.
    while !s.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server_to_client(mut server: TcpStream, mut client: TcpStream) {
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Write);
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for c in self.shared.conns.lock().unwrap().iter() {
            let _ = c.shutdown(Shutdown::Both);
        }
        // Wake the accepting loop so that it sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}
