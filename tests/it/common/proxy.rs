//! A loopback TCP proxy that stalls: it forwards every connection to a target (a registry)
//! both ways until `limit` bytes in all have gone client → server, then forwards nothing more
//! from any client (it stops reading, so the client's writes back up) and says so
//! (`is_stalled`, `wait_stalled_or_exit`). A test kills its client at that moment: mid-body,
//! deterministically. Answers from the server still flow back. Dropping the proxy closes
//! every connection. Every wait here is on a condition variable, none on a time.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

struct Shared {
    target: String,
    limit: u64,
    /// Bytes forwarded client → server, all connections together.
    forwarded: Mutex<u64>,
    stalled: AtomicBool,
    /// The client being watched exited (`wait_stalled_or_exit`).
    exited: AtomicBool,
    /// Notified, under `forwarded`'s lock, when `stalled`, `exited` or `stop` is set.
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
            exited: AtomicBool::new(false),
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

    /// Wait until the proxy stalls (`Some(true)`) or `client` exits first (`Some(false)`, seen
    /// by a thread that waits for its exit without reaping it); `None` when neither happened
    /// within `limit`, which bounds only a hung client.
    pub fn wait_stalled_or_exit(
        &self,
        client: &std::process::Child,
        limit: Duration,
    ) -> Option<bool> {
        let pid = client.id() as libc::id_t;
        let shared = self.shared.clone();
        std::thread::spawn(move || {
            // SAFETY: an all-zero siginfo_t is valid; waitid writes only it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            while unsafe {
                libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
            } != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
            let _g = shared.forwarded.lock().unwrap();
            shared.exited.store(true, Ordering::SeqCst);
            shared.stalled_cv.notify_all();
        });
        let g = self.shared.forwarded.lock().unwrap();
        let (_g, waited) = self
            .shared
            .stalled_cv
            .wait_timeout_while(g, limit, |_| {
                !self.is_stalled() && !self.shared.exited.load(Ordering::SeqCst)
            })
            .unwrap();
        if self.is_stalled() {
            Some(true)
        } else if waited.timed_out() {
            None
        } else {
            Some(false)
        }
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
    let g = s.forwarded.lock().unwrap();
    drop(
        s.stalled_cv
            .wait_while(g, |_| !s.stop.load(Ordering::SeqCst))
            .unwrap(),
    );
}

fn server_to_client(mut server: TcpStream, mut client: TcpStream) {
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Write);
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        {
            let _g = self.shared.forwarded.lock().unwrap();
            self.shared.stop.store(true, Ordering::SeqCst);
            self.shared.stalled_cv.notify_all();
        }
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
