//! The fuzz loop every target shares: seeded inputs, a budget, and the oracles that hold for any
//! parser (no panic, no hang, bounded memory) next to the target's own properties.
//!
//! A plain `cargo test` runs each target for a fixed number of iterations from a seed derived
//! from its name, so CI sees the same inputs every time. `GPUIMG_FUZZ_SECONDS=N` runs each for N
//! seconds from a fresh seed instead (`GPUIMG_FUZZ_SEED` repeats a run); `scripts/fuzz.sh` does
//! that and prints one line per target. Before each input runs it is written to
//! `<target tmp>/fuzz/<target>.current`, so an input that kills the process (memory cap, hang,
//! stack overflow) is on disk afterwards; inputs that fail a property or panic are saved under
//! `<target tmp>/fuzz/crashes/<target>/` and fail the test. Committed regressions
//! (`tests/fuzz/regressions/<target>/`) and the seed corpus are replayed by every run. The
//! bounds are the kernel's, exact, with nothing sampled: a hang is an input past its CPU time
//! (`RLIMIT_CPU`, set per input), and the process's peak resident memory is what `wait4`
//! reports of it (`common::peak`).

use std::cell::RefCell;
use std::io::{Seek, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use arbitrary::Unstructured;

/// What became of an input (`accepted`, `refused`, ...; tallied in the summary), or `Err`
/// naming the property the parser's result broke.
pub type Verdict = Result<&'static str, String>;

/// Builds one input from the seeds and the fuzz bytes.
pub type Mutator = fn(&[Vec<u8>], &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>>;

/// One fuzz target: a parser of untrusted bytes and what must hold for every input.
pub struct Target {
    pub name: &'static str,
    /// Real inputs to start from (read from `tests/fuzz/corpus/<name>/` or built in memory).
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Build one input from the seeds and structured choices decoded from fuzz bytes.
    pub mutate: Mutator,
    /// Feed one input to the parser: what became of it, or the property it broke.
    pub check: fn(&[u8]) -> Verdict,
    /// Iterations in a plain test run (a few seconds in a debug build).
    pub iterations: u64,
}

/// The repository root (inputs that are real files of the project are read from there).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `tests/fuzz/<kind>/<target>/`, sorted by name.
pub fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = repo().join("tests/fuzz").join(kind).join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, b)
        })
        .collect();
    out.sort();
    out
}

fn work_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join(format!("gpuimg-fuzz-{}", std::process::id()))
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz/work")
    }
}

/// Remove the working space of fuzz processes that died (hang, memory cap) before cleaning up.
fn remove_stale_work() {
    for e in std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("gpuimg-fuzz-") else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Working space for targets that need files: in memory (`/dev/shm`) where there is one, as
/// most of their time goes to creating and removing files; removed when the target ends.
pub fn work_dir(target: &str) -> PathBuf {
    let d = work_base().join(target);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}=`{v}` is not a number")),
    )
}

/// Set in the child process a target runs in (see [`run`]).
const CHILD: &str = "GPUIMG_FUZZ_CHILD";

/// Run `t` in a process of its own (this test binary again, running only this target's test),
/// on a thread with a main thread's stack (8 MiB), as the binaries parse. Its own process,
/// because the oracles are the process's: the heap cap, the CPU-time limit, the peak resident
/// memory, the panic hook, and a hang or a memory blow-up ends the process; the other tests of
/// the binary must neither count against them nor die with it.
pub fn run(t: &'static Target) {
    if std::env::var_os(CHILD).is_none() {
        return run_in_child(t);
    }
    install_hooks();
    let h = std::thread::Builder::new()
        .name(t.name.to_string())
        .stack_size(8 << 20)
        .spawn(move || run_here(t))
        .unwrap_or_else(|e| panic!("cannot start the `{}` thread: {e}", t.name));
    if let Err(p) = h.join() {
        std::panic::resume_unwind(p);
    }
}

fn run_in_child(t: &'static Target) {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("the test binary's path: {e}"));
    let test = format!("fuzz::fuzz_{}", t.name);
    let mut cmd = std::process::Command::new(&exe);
    cmd.args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    // The child's own peak, exact (`wait4`); its data segment is held to twice the cap so that
    // a runaway allocation (a C library's: the allocator's cap sees only Rust's) fails in it
    // rather than take the machine's memory.
    let cap = memory_cap();
    let (out, peak_kb) = crate::common::run_with_peak(&cmd, Some(2 * cap as u64));
    // The target's own lines, through this process's output (the harness captures it); the
    // child's test-runner lines (`running 1 test`, `test result: ...`) would be counted twice.
    let runner = |l: &&str| {
        l.is_empty() || l.starts_with("running ") || l.starts_with("test ") || l == &"successes:"
    };
    // Into a pipe, libtest writes `test <name> ... ` before the test runs: the target's own line
    // follows it on the same line.
    let started = format!("test {test} ... ");
    for l in String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.strip_prefix(started.as_str()).unwrap_or(l))
        .filter(|l| !runner(l) && *l != "ok")
    {
        println!("{l}");
    }
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let current = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz")
        .join(format!("{}.current", t.name));
    // The spawner exits 128 + N for a child killed by signal N.
    assert!(
        out.status.code() != Some(128 + libc::SIGXCPU),
        "fuzz {}: an input ran for more than {} s of CPU time (a hang); the input is in {}",
        t.name,
        cpu_limit().as_secs(),
        current.display()
    );
    assert!(
        out.status.success(),
        "fuzz {}: its process ended with {}; the last input is in {}",
        t.name,
        out.status,
        current.display()
    );
    assert!(
        peak_kb << 10 <= cap as u64,
        "fuzz {}: resident memory peaked at {} MiB, past {} MiB (GPUIMG_FUZZ_MEMORY_MB)",
        t.name,
        peak_kb >> 10,
        cap >> 20
    );
}

/// The bound on a fuzz process's memory (`GPUIMG_FUZZ_MEMORY_MB`, default 1024), in bytes.
fn memory_cap() -> usize {
    (env_u64("GPUIMG_FUZZ_MEMORY_MB").unwrap_or(1024) as usize) << 20
}

/// The CPU time one input may take (`GPUIMG_FUZZ_TIMEOUT` seconds, default 10), read once.
fn cpu_limit() -> Duration {
    static LIMIT: OnceLock<Duration> = OnceLock::new();
    *LIMIT.get_or_init(|| Duration::from_secs(env_u64("GPUIMG_FUZZ_TIMEOUT").unwrap_or(10)))
}

struct Failure {
    what: String,
    saved: PathBuf,
}

fn run_here(t: &'static Target) {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let current_path = out.join(format!("{}.current", t.name));
    let mut current = std::fs::File::create(&current_path)
        .unwrap_or_else(|e| panic!("{}: {e}", current_path.display()));
    let seconds = env_u64("GPUIMG_FUZZ_SECONDS");
    let seed = env_u64("GPUIMG_FUZZ_SEED").unwrap_or_else(|| match seconds {
        // A timed run explores: a fresh seed each time (printed, so it can be repeated).
        Some(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        // A test run repeats itself: the seed is the target's name.
        None => t.name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        }),
    });
    let seeds = (t.seeds)();
    assert!(!seeds.is_empty(), "target `{}` has no seed input", t.name);

    let mut failures: Vec<Failure> = Vec::new();
    let mut crashes = 0u64;
    let mut outcomes: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let mut exec = |label: &str, input: &[u8]| {
        let _ = current.rewind();
        let _ = current.set_len(0);
        let _ = current.write_all(input);
        watchdog_arm(t.name);
        let r = catch_unwind(AssertUnwindSafe(|| (t.check)(input)));
        watchdog_disarm(t.name);
        let what = match r {
            Ok(Ok(outcome)) => {
                *outcomes.entry(outcome).or_default() += 1;
                return;
            }
            Ok(Err(property)) => property,
            Err(_) => LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_default(),
        };
        crashes += 1;
        let saved = save_crash(&out, t.name, input);
        if !failures.iter().any(|f| f.what == what) {
            eprintln!(
                "fuzz {}: {label}: {what}\n  input saved as {}",
                t.name,
                saved.display()
            );
            failures.push(Failure { what, saved });
        }
    };
    for (i, s) in seeds.iter().enumerate() {
        exec(&format!("seed {i}"), s);
    }
    for (p, b) in files("regressions", t.name) {
        exec(&p.display().to_string(), &b);
    }

    let start = Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        let more = match seconds {
            Some(s) => start.elapsed() < Duration::from_secs(s),
            None => n < t.iterations,
        };
        if !more {
            break;
        }
        n += 1;
        // Mostly short choice strings, sometimes long ones (many mutations, long inserts).
        let len = 1usize << rng.u32(6..13);
        buf.clear();
        buf.resize(len + rng.usize(..len), 0);
        rng.fill(&mut buf);
        let mut u = Unstructured::new(&buf);
        let Ok(input) = (t.mutate)(&seeds, &mut u) else {
            continue;
        };
        exec(&format!("iteration {n}"), &input);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(current);
    let _ = std::fs::remove_file(&current_path);
    let _ = std::fs::remove_dir_all(work_base().join(t.name));
    let _ = std::fs::remove_dir(work_base()); // succeeds for the last target to finish
    let total: u64 = outcomes.values().sum::<u64>().max(1);
    let tally = outcomes
        .iter()
        .map(|(k, v)| format!("{k} {:.1}%", *v as f64 * 100.0 / total as f64))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "fuzz {}: {n} iterations, {secs:.1} s, {crashes} crashes (seed {seed}); {tally}",
        t.name
    );
    assert!(
        failures.is_empty(),
        "fuzz target `{}` failed on {} input(s) (seed {seed}):\n{}",
        t.name,
        crashes,
        failures
            .iter()
            .map(|f| format!("  {}\n    saved as {}", f.what, f.saved.display()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn save_crash(out: &Path, target: &str, input: &[u8]) -> PathBuf {
    let dir = out.join("crashes").join(target);
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(&gpuimg_store::digest::Digest::of(input).hex()[..16]);
    let _ = std::fs::write(&p, input);
    p
}

thread_local! {
    /// The message and place of the last panic on this thread (the hook records it).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOKS: Once = Once::new();

/// A panic inside a target is recorded, not printed (the harness reports each kind once);
/// panics elsewhere (a failed run's final assertion) print as usual.
fn install_hooks() {
    HOOKS.call_once(|| {
        configure_cap();
        remove_stale_work();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let armed = std::thread::current()
                .name()
                .is_some_and(|n| WATCH.lock().is_ok_and(|w| w.contains(&n)));
            if !armed {
                return default(info);
            }
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("panicked: {msg}{at}")));
        }));
    });
}

/// Targets running an input now.
static WATCH: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// The CPU time this process has used (user and system, every thread). A fuzz process runs one
/// target, so what it used since an input started is that input's: unlike the wall clock, it
/// does not run on while the machine is busy with other work or the process is stopped.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// An input starts: its panics are recorded, and the process may use [`cpu_limit`] more CPU
/// time (rounded up to the second `RLIMIT_CPU` counts in); past it the kernel ends the process
/// with `SIGXCPU`.
fn watchdog_arm(name: &'static str) {
    if let Ok(mut w) = WATCH.lock() {
        w.retain(|s| *s != name);
        w.push(name);
    }
    let secs = (cpu_time() + cpu_limit()).as_secs() + 1;
    set_cpu_limit(secs as libc::rlim_t);
}

/// The input ended: no CPU-time limit until the next one.
fn watchdog_disarm(name: &'static str) {
    set_cpu_limit(libc::RLIM_INFINITY);
    if let Ok(mut w) = WATCH.lock() {
        w.retain(|s| *s != name);
    }
}

/// Set this process's soft `RLIMIT_CPU` to `secs` (at most its hard limit).
fn set_cpu_limit(secs: libc::rlim_t) {
    // SAFETY: getrlimit and setrlimit only read and write the struct they are given.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_CPU, &mut r) == 0 {
            r.rlim_cur = secs.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_CPU, &r);
        }
    }
}

/// Read the heap cap once (`GPUIMG_FUZZ_MEMORY_MB`, default 1024), before any input runs, in
/// the fuzz child process only: the binary's allocator (`common::heap`) then refuses to let the
/// live heap grow past it; an allocation past it fails, which aborts the process, and the input
/// is then in `<target>.current`.
fn configure_cap() {
    crate::common::heap::set_cap(memory_cap());
}
