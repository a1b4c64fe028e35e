//! Running commands: one family of functions for every test. `run` starts a command and
//! returns its output; `run_ok` and `run_ok_bytes` also require success; `run_within` kills a
//! command that outlives a limit (`exits_within` waits for a child's exit without polling);
//! `first_line` waits for the line a server prints once it is ready. A failure names the
//! command line (with the environment it sets), the exit status, stdout and stderr.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Fail loudly when a tool the test needs is missing (scripts/install-deps.sh installs it).
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: run `bash scripts/install-deps.sh` (tests never skip)"
    );
}

/// The first `tool` on PATH.
pub fn which(tool: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("`{tool}` not found on PATH"))
}

/// `cmd` as a shell would show it: the variables it sets or removes, the program, the
/// arguments, and the directory it runs in when it sets one.
pub fn command_line(cmd: &Command) -> String {
    let quote = |s: &std::ffi::OsStr| {
        let s = s.to_string_lossy();
        if !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,%".contains(c))
        {
            s.into_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    let mut words = Vec::new();
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => words.push(format!("{}={}", k.to_string_lossy(), quote(v))),
            None => words.push(format!("-u {}", k.to_string_lossy())),
        }
    }
    if !words.is_empty() {
        words.insert(0, "env".to_string());
    }
    words.push(quote(cmd.get_program()));
    words.extend(cmd.get_args().map(quote));
    let mut line = words.join(" ");
    if let Some(d) = cmd.get_current_dir() {
        line.push_str(&format!("  (in {})", d.display()));
    }
    line
}

/// At most the last 16 KiB of `bytes`, as text.
fn tail(bytes: &[u8]) -> String {
    const MAX: usize = 16 << 10;
    let s = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(MAX)..]);
    if bytes.len() > MAX {
        format!("[… {} bytes before]{s}", bytes.len() - MAX)
    } else {
        s.into_owned()
    }
}

/// The failure message for `cmd` that ended with `out`.
pub fn describe(cmd: &Command, out: &Output) -> String {
    format!(
        "`{}` failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        command_line(cmd),
        out.status,
        tail(&out.stdout),
        tail(&out.stderr)
    )
}

/// A finished command's exit code and whole output, for assertion messages about a run whose
/// exit status is itself under test (a container, the self-test).
pub fn describe_run(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run `cmd` to its end; whatever its exit status, return its output.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("failed to start `{}`: {e}", command_line(cmd)))
}

/// Run `cmd`, require exit status 0, and return its stdout.
pub fn run_ok_bytes(cmd: &mut Command) -> Vec<u8> {
    let out = run(cmd);
    assert!(out.status.success(), "{}", describe(cmd, &out));
    out.stdout
}

/// Run `cmd`, require exit status 0, and return its stdout as text.
pub fn run_ok(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_ok_bytes(cmd)).into_owned()
}

/// Run `cmd` as `run` does, but fail the test if it is still running after `limit` (a FIFO
/// opened for reading, say, would block it forever).
pub fn run_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start `{}`: {e}", command_line(cmd)));
    // Drain both pipes while waiting, so that a chatty command cannot block on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    if !exits_within(&mut child, limit) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("`{}` still ran after {limit:?}", command_line(cmd));
    }
    let status = child.wait().expect("wait for the child");
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Whether `child` exits within `limit`, waited for on a thread of its own (no polling) that
/// only sees the exit (`WNOWAIT`): the child is left to be reaped by its owner, so a kill after
/// `limit`, which only a hung command meets, hits no other process.
pub fn exits_within(child: &mut std::process::Child, limit: Duration) -> bool {
    let pid = child.id() as libc::id_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: an all-zero siginfo_t is valid; waitid writes only it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        while unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) }
            != 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        let _ = tx.send(());
    });
    rx.recv_timeout(limit).is_ok()
}

/// Read `from` line by line on a thread, copying every line to `copy` (a log kept for the
/// test), and return the first line `wanted` accepts: `None` once `from` ends without one (the
/// program exited). A program that neither says it nor ends within `limit` fails the test (the
/// limit bounds only a hung program; readiness is the line).
pub fn first_line(
    from: impl Read + Send + 'static,
    mut copy: impl Write + Send + 'static,
    wanted: impl Fn(&str) -> bool + Send + 'static,
    limit: Duration,
) -> Option<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(copy, "{line}");
            let _ = copy.flush();
            if wanted(&line) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(line);
                }
            }
        }
    });
    match rx.recv_timeout(limit) {
        Ok(line) => Some(line),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("a program neither said it was ready nor ended within {limit:?}")
        }
    }
}

/// `inner` started through `outer` (e.g. `["sh", "-c", "umask 077 && exec \"$@\"", "sh"]`):
/// the outer program gets the inner program and arguments after its own, and the inner
/// command's environment and directory, so an isolated command stays isolated.
pub fn wrap(outer: &[&str], inner: &Command) -> Command {
    let (program, args) = outer.split_first().expect("an outer program");
    let mut c = Command::new(program);
    c.args(args).arg(inner.get_program()).args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = inner.get_current_dir() {
        c.current_dir(d);
    }
    c
}
