//! The parent's side of a run: checks the spec, prepares the mounts, clones the sandbox's init
//! into its namespaces, writes its user namespace's maps, reads the log while the time limit
//! runs (killing the whole pid namespace at it), reaps the init, reads how the command ended
//! and, only on success, copies the output to the host. Must never return while a process of
//! the sandbox is alive ([`Init`]'s drop kills and reaps it on every path).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use libc::c_int;

use crate::child::{self, ChildFds, ExecArgs, Record};
use crate::error::{LogTail, SandboxError, Step};
use crate::log::LogWriter;
use crate::prepare::{self, Prepared, DEVICES};
use crate::spec::{Ran, Spec, Status, SANDBOX_ID};
use crate::syscalls;
use crate::tree_copy;

/// How long the log is still read once the init ended (every writer is dead by then; this
/// bounds a descriptor that escaped the namespace some other way).
const DRAIN: Duration = Duration::from_secs(2);

/// The sandbox's init, killed (with its whole pid namespace) and reaped when dropped unless
/// reaped already.
struct Init {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    status: Option<c_int>,
}

impl Init {
    fn kill(&self) {
        let _ = syscalls::pidfd_kill(self.pidfd.as_fd(), libc::SIGKILL);
    }

    /// Wait for the init to end (it has, or was killed).
    fn reap(&mut self) -> io::Result<c_int> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        loop {
            let mut status: c_int = 0;
            // SAFETY: our own child's pid.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                self.status = Some(status);
                return Ok(status);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Init {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.kill();
            let _ = self.reap();
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: two ints for the kernel to fill.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Wait until `fds` are readable or `timeout` passes; the `revents` of each.
fn poll(fds: &[&OwnedFd], timeout: Option<Duration>) -> io::Result<Vec<i16>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as c_int);
    // SAFETY: a valid array of pollfd.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![0; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents).collect())
}

/// Run `spec` (see [`crate::run`]).
pub fn run(spec: &Spec) -> Result<Ran, SandboxError> {
    spec.check()?;
    // SAFETY: no arguments.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        return Err(SandboxError::NotRoot { uid });
    }
    if spec.output.host.symlink_metadata().is_ok() {
        return Err(SandboxError::OutputExists {
            path: spec.output.host.clone(),
        });
    }
    let mut log = LogWriter::create(&spec.log)?;
    let prepared = prepare::prepare(spec)?;
    let null = std::ptr::null();
    let argv: Vec<*const libc::c_char> = prepared
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain([null])
        .collect();
    let envp: Vec<*const libc::c_char> = prepared
        .env
        .iter()
        .map(|a| a.as_ptr())
        .chain([null])
        .collect();
    let watch = SandboxError::Watch;
    let (log_r, log_w) = pipe().map_err(watch)?;
    let (report_r, report_w) = pipe().map_err(watch)?;
    let (sync, sync_child) = socket_pair().map_err(watch)?;
    let fds = ChildFds {
        report: report_w.as_raw_fd(),
        sync: sync_child.as_raw_fd(),
        log: log_w.as_raw_fd(),
    };
    let exec = ExecArgs {
        argv: &argv,
        envp: &envp,
    };
    let started = Instant::now();
    let namespaces = libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP;
    // SAFETY: the child runs `child::init` only, which makes system calls on what was made
    // above and never returns.
    let (pid, pidfd) = match unsafe { syscalls::clone_with(namespaces) } {
        Err(e) => return Err(SandboxError::Clone(e)),
        Ok(None) => unsafe { child::init(&prepared, &fds, &exec) },
        Ok(Some(p)) => p,
    };
    let mut init = Init {
        pid,
        pidfd,
        status: None,
    };
    drop((log_w, report_w, sync_child));
    let deadline = started + spec.time_limit;
    let mapped = map_user_namespace(&init, sync, deadline);
    let timed_out = watch_log(&init, &log_r, &mut log, deadline)?;
    init.reap().map_err(SandboxError::Watch)?;
    let userns = mapped?;
    let records = read_records(report_r);
    let tail = LogTail(log.last_lines());
    let command = Path::new(&spec.argv[0]).display().to_string();
    if timed_out {
        return Err(SandboxError::TimedOut {
            command,
            limit: spec.time_limit,
            tail,
        });
    }
    if let Some(r) = records.iter().find(|r| r.tag == child::TAG_FAILED) {
        return Err(setup_error(spec, &prepared, r));
    }
    let Some(status) = records
        .iter()
        .find(|r| r.tag == child::TAG_STATUS)
        .map(|r| r.value)
    else {
        return Err(SandboxError::NoStatus { tail });
    };
    if libc::WIFSIGNALED(status) {
        return Err(SandboxError::Signaled {
            command,
            signal: libc::WTERMSIG(status),
            tail,
        });
    }
    let code = libc::WEXITSTATUS(status);
    if code != 0 {
        return Err(SandboxError::Exited {
            command,
            code,
            output_full: output_full(&prepared),
            tail,
        });
    }
    copy_output(spec, &prepared)?;
    Ok(Ran {
        status: Status::Exited(0),
        log_tail: tail.0,
        log_bytes: log.total(),
        log_cut: log.cut(),
        user_namespace: userns,
    })
}

/// Answer the init's message: map its new user namespace's root to [`SANDBOX_ID`] (`Ok(true)`),
/// or hear that none could be made (`Ok(false)`). An init that ended first is `Ok(false)`: its
/// report says why.
fn map_user_namespace(init: &Init, sync: OwnedFd, deadline: Instant) -> Result<bool, SandboxError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // The time limit ends it (`watch_log`).
            return Ok(false);
        }
        if poll(&[&sync], Some(left)).map_err(SandboxError::Watch)?[0] != 0 {
            break;
        }
    }
    let mut sync = File::from(sync);
    let mut msg = [0u8; 1];
    if sync.read(&mut msg).map_err(SandboxError::Watch)? != 1 || msg[0] != child::UNSHARED {
        return Ok(false);
    }
    let proc = PathBuf::from(format!("/proc/{}", init.pid));
    let map = format!("0 {SANDBOX_ID} 1\n");
    let written = std::fs::write(proc.join("setgroups"), "deny")
        .and_then(|()| std::fs::write(proc.join("uid_map"), &map))
        .and_then(|()| std::fs::write(proc.join("gid_map"), &map));
    let answer = if written.is_ok() {
        child::MAPPED
    } else {
        child::NOT_MAPPED
    };
    let _ = sync.write_all(&[answer]);
    written.map(|()| true).map_err(SandboxError::Mapping)
}

/// Read the log until the init ended and every writer closed it; past `deadline`, kill the
/// init (and with it the whole pid namespace). `Ok(true)` when the time limit killed it.
fn watch_log(
    init: &Init,
    log_r: &OwnedFd,
    log: &mut LogWriter,
    deadline: Instant,
) -> Result<bool, SandboxError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut reader = File::from(log_r.try_clone().map_err(SandboxError::Watch)?);
    let (mut ended, mut eof, mut killed) = (false, false, false);
    let mut ended_at: Option<Instant> = None;
    while !eof {
        let now = Instant::now();
        if !ended && !killed && now >= deadline {
            init.kill();
            killed = true;
        }
        let timeout = match (ended_at, killed) {
            (Some(at), _) => {
                let left = (at + DRAIN).saturating_duration_since(now);
                if left.is_zero() {
                    break;
                }
                Some(left)
            }
            (None, true) => None,
            (None, false) => Some(deadline.saturating_duration_since(now)),
        };
        let ready = poll(&[log_r, &init.pidfd], timeout).map_err(SandboxError::Watch)?;
        if ready[0] != 0 {
            match reader.read(&mut buf) {
                Ok(0) => eof = true,
                Ok(n) => log.push(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SandboxError::Watch(e)),
            }
        }
        if ready[1] != 0 && !ended {
            ended = true;
            ended_at = Some(Instant::now());
        }
    }
    Ok(killed)
}

/// Every record the init and the command's process wrote (all writers are gone).
fn read_records(report_r: OwnedFd) -> Vec<Record> {
    let mut bytes = Vec::new();
    let _ = File::from(report_r).read_to_end(&mut bytes);
    let size = std::mem::size_of::<Record>();
    bytes
        .chunks_exact(size)
        .map(|c| {
            let word = |i: usize| [c[i], c[i + 1], c[i + 2], c[i + 3]];
            Record {
                tag: u32::from_ne_bytes(word(0)),
                step: u32::from_ne_bytes(word(4)),
                index: u32::from_ne_bytes(word(8)),
                value: i32::from_ne_bytes(word(12)),
            }
        })
        .collect()
}

/// The error a failed step's record names, with the path it concerned.
fn setup_error(spec: &Spec, p: &Prepared, r: &Record) -> SandboxError {
    let step = Step::from_code(r.step).unwrap_or(Step::Exec);
    let i = r.index as usize;
    let path = match step {
        Step::PlaceRoot | Step::PivotRoot => Some(spec.root.clone()),
        Step::MountProc => Some(PathBuf::from("/proc")),
        Step::MountDev => Some(match DEVICES.get(i) {
            Some(d) => Path::new("/dev").join(d),
            None => PathBuf::from("/dev"),
        }),
        Step::MountInside => p.mounts.get(i).map(|m| m.inside_path.clone()),
        Step::Workdir => Some(spec.workdir.clone()),
        Step::Exec => Some(PathBuf::from(&spec.argv[0])),
        _ => None,
    };
    SandboxError::Setup {
        step,
        path,
        source: io::Error::from_raw_os_error(r.value),
    }
}

/// Whether the output's tmpfs is full (the command failed writing past its bound).
fn output_full(p: &Prepared) -> bool {
    // SAFETY: a zeroed struct for the kernel to fill, on a valid descriptor.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatvfs(p.output_fd().as_raw_fd(), &mut st) };
    r == 0 && (st.f_bavail == 0 || st.f_favail == 0)
}

/// Copy the output's tmpfs to a staging directory beside `spec.output.host`, then rename it
/// into place.
fn copy_output(spec: &Spec, p: &Prepared) -> Result<(), SandboxError> {
    let host = &spec.output.host;
    let err = |source| SandboxError::Output {
        path: host.clone(),
        source,
    };
    let parent = host.parent().unwrap_or(Path::new("/"));
    let stem = host
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let staged = gpuimg_store::staging::Staged::dir(parent, &stem, 0o755).map_err(err)?;
    let from = PathBuf::from(format!("/proc/self/fd/{}", p.output_fd().as_raw_fd()));
    tree_copy::copy_out(&from, staged.path(), spec.output.max_bytes)?;
    staged.persist(host).map_err(err)
}
