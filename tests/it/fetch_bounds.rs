//! RELIABILITY.md, class 4: every download is bounded against a hostile or broken mirror.
//! Endless and oversized roots hit the fixed cap, indexes and packages their signed size (both
//! longer and shorter), drips and stalls are timed out with the measured rate, one deadline
//! bounds all attempts, and server errors are retried a bounded number of times and then named.
//! The `gpuimg` binary fails fast on endless bodies with its memory bounded.
//!
//! Time is each case's own manual clock (`gpuimg_fetch::ManualClock`, debug builds): a drip
//! moves it in step with the client's reads and a backoff moves it by the wait asked for, so
//! the tests assert the decisions (which bound, the rate measured, the attempts, the waits
//! requested) and nothing waits but a hang, for one socket timeout of the clock's choosing.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use gpuimg_apt::{self as apt, AptOptions};
use gpuimg_build::plan::source_specs;
use gpuimg_build::profile::{self, Base};
use gpuimg_fetch::observe::Observer;
use gpuimg_fetch::{Clock, FetchLimits, ManualClock, BACKOFF, MAX_ROOT_BYTES};

/// Suites, one per test case that faults a path below `dists/<suite>/`.
const SUITES: &[&str] = &[
    "good", "cap1", "cap2", "cap3", "cap4", "cap5", "cap6", "idx1", "idx2", "idx3", "idx4", "idx5",
    "idx6", "short1", "short2", "drip1", "drip2", "drip3", "dl1", "dl2", "err1", "err2", "err3",
    "err4", "bin1", "bin2", "bin3", "bin4", "bomb1", "bomb2",
];

/// Packages, one per test case that faults a `.deb`.
const DEBS: &[&str] = &[
    "ok",
    "long1",
    "long2",
    "longu",
    "endless",
    "huge",
    "short1",
    "short2",
    "close0",
    "close1",
    "trunc",
    "drip1",
    "drip2",
    "hang",
    "dl1",
    "e429",
    "e502",
    "e403",
    "flaky",
    "bin-endless",
    "bin-long",
];

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    key: PathBuf,
    server: Server,
}

static FIXTURE: OnceLock<Fixture> = OnceLock::new();

fn fixture() -> &'static Fixture {
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let work = dir.path().join("work");
        let (home, key) = gen_key(dir.path(), "bounds");
        let data: &'static [u8] = Box::leak(
            (0..6000u32)
                .map(|i| (i * 7 % 251) as u8)
                .collect::<Vec<_>>()
                .into(),
        );
        let stanzas: Vec<String> = DEBS
            .iter()
            .map(|name| {
                let mut p = pkg(name, "1.0");
                p.files = vec![("/usr/share/bounds/data", data, 0o644)];
                p.compression = "none";
                stanza(&root, &build_deb(&root, &work, &p))
            })
            .collect();
        for s in SUITES {
            write_dist(&root, s, &stanzas, Some(&home));
        }
        // Signed releases that understate the plain `Packages` size (a decompression bomb).
        shrink_plain_size(&root, "bomb1", &home, 1);
        shrink_plain_size(&root, "bomb2", &home, usize::MAX);
        let server = serve(&root);
        Fixture {
            _dir: dir,
            root,
            key,
            server,
        }
    })
}

/// Make the signed Release of `suite` give the plain `Packages` `by` bytes fewer (at least 0),
/// and sign it again.
fn shrink_plain_size(root: &Path, suite: &str, home: &Path, by: usize) {
    let dist = root.join("dists").join(suite);
    let release = std::fs::read_to_string(dist.join("Release")).unwrap();
    let fixed: Vec<String> = release
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                [h, n, "main/binary-amd64/Packages"] => {
                    let n: usize = n.parse().unwrap();
                    format!(" {h} {} main/binary-amd64/Packages", n.saturating_sub(by))
                }
                _ => l.to_string(),
            }
        })
        .collect();
    std::fs::write(dist.join("Release"), fixed.join("\n") + "\n").unwrap();
    for (flag, out) in [("--clearsign", "InRelease"), ("-abs", "Release.gpg")] {
        run_ok_bytes(
            std::process::Command::new("gpg")
                .env("GNUPGHOME", home)
                .args(["--batch", "--yes", flag, "-o"])
                .arg(dist.join(out))
                .arg(dist.join("Release")),
        );
    }
}

fn server() -> &'static Server {
    &fixture().server
}

fn url(path: &str) -> String {
    format!("{}{path}", server().url)
}

fn size_of(path: &str) -> u64 {
    std::fs::metadata(fixture().root.join(path.trim_start_matches('/')))
        .unwrap()
        .len()
}

fn deb(name: &str) -> String {
    format!("/pool/main/{name}_1.0_amd64.deb")
}

fn index(suite: &str) -> String {
    format!("/dists/{suite}/main/binary-amd64/Packages.gz")
}

fn inrelease(suite: &str) -> String {
    format!("/dists/{suite}/InRelease")
}

struct Silent;

impl Observer for Silent {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, _: &str) {}
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}

/// Tight bounds, on a manual clock whose stalled sockets wait 30 s (none stalls here).
fn quick() -> FetchLimits {
    FetchLimits {
        window: Duration::from_secs(1),
        min_rate: 1000,
        deadline_base: Duration::from_secs(30),
        deadline_rate: 1 << 20,
        attempts: 3,
        backoff: Duration::from_millis(20),
        clock: Clock::manual(ManualClock::leak(Duration::from_secs(30))),
    }
}

/// Install `package` from `suite` with `limits` into a fresh directory: the error text (or
/// `Ok`), and whether the destination stayed empty.
fn install(suite: &str, package: &str, limits: FetchLimits) -> (Result<(), String>, bool) {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(&f.key, tmp.path().join("repo.gpg")).unwrap();
    let yaml = format!(
        "name: t\nbase:\n  apt:\n    mirror: {}\n    suite: {suite}\n    packages: [{package}]\n    keyring: repo.gpg\n",
        f.server.url
    );
    let p = profile::parse(&yaml, "t.yaml", tmp.path(), &|_| None).unwrap();
    let Base::Apt(spec) = p.base else {
        panic!("no apt base")
    };
    let mut opts = AptOptions::new(tmp.path().join("cache"));
    opts.apt_dir = tmp.path().join("no-host-apt");
    opts.limits = limits;
    let dest = tmp.path().join("root");
    std::fs::create_dir(&dest).unwrap();
    let r = apt::install(
        &source_specs::apt_packages(&spec, tmp.path()),
        &source_specs::architecture(&p.platform).debian(),
        &opts,
        None,
        &dest,
        &mut Silent,
    );
    let empty = std::fs::read_dir(&dest).unwrap().next().is_none();
    (r.map(|_| ()).map_err(|e| e.to_string()), empty)
}

/// Run each `(suite, package, faulted path, fault)` case in parallel with `limits`, each on a
/// manual clock of its own whose stalled sockets wait `socket` of real time (the path's drip
/// moves it); hand each result and its clock to `check`.
fn cases(
    limits: FetchLimits,
    socket: Duration,
    list: &[(&str, &str, String, Fault)],
    check: impl Fn(&str, Fault, Result<(), String>, bool, &ManualClock) + Sync,
) {
    for (_, _, path, fault) in list {
        server().fault(path, *fault);
    }
    std::thread::scope(|s| {
        for (suite, package, path, fault) in list {
            let check = &check;
            s.spawn(move || {
                let clock = ManualClock::leak(socket);
                server().pace(path, clock);
                let limits = FetchLimits {
                    clock: Clock::manual(clock),
                    ..limits
                };
                let (r, empty) = install(suite, package, limits);
                check(path, *fault, r, empty, clock);
            });
        }
    });
}

/// No stalled socket is expected: a long real wait before one counts.
const NO_STALL: Duration = Duration::from_secs(30);

/// Waits of `ms` milliseconds each.
fn waits(ms: &[u64]) -> Vec<Duration> {
    ms.iter().map(|&m| Duration::from_millis(m)).collect()
}

/// The waits the case's downloads asked for between attempts (the one before a first attempt
/// is none).
fn backoffs(clock: &ManualClock) -> Vec<Duration> {
    clock.slept().into_iter().filter(|d| !d.is_zero()).collect()
}

#[test]
fn the_fixture_installs_when_nothing_misbehaves() {
    let (r, empty) = install("good", "ok", quick());
    assert_eq!(r, Ok(()));
    assert!(!empty);
}

#[test]
fn endless_or_oversized_roots_hit_the_cap() {
    let cap = MAX_ROOT_BYTES;
    server().fault("/dists/cap5/InRelease", Fault::Status(404));
    server().fault("/dists/cap6/InRelease", Fault::Status(404));
    let list = [
        ("cap1", "ok", inrelease("cap1"), Fault::Endless),
        ("cap2", "ok", inrelease("cap2"), Fault::EndlessChunked),
        ("cap3", "ok", inrelease("cap3"), Fault::HugeLength),
        (
            "cap4",
            "ok",
            inrelease("cap4"),
            Fault::LongUnannounced(cap as usize),
        ),
        ("cap5", "ok", "/dists/cap5/Release".into(), Fault::Endless),
        (
            "cap6",
            "ok",
            "/dists/cap6/Release.gpg".into(),
            Fault::EndlessChunked,
        ),
    ];
    cases(quick(), NO_STALL, &list, |path, fault, r, empty, _| {
        let seen = match fault {
            Fault::HugeLength => "the server announces 10000000000 bytes".to_string(),
            _ => format!("the server sent more than {cap} bytes"),
        };
        assert_eq!(
            r,
            Err(format!(
                "Download of `{}` exceeds the cap of {cap} bytes ({seen})",
                url(path)
            )),
            "{fault:?}"
        );
        assert!(empty);
        assert_eq!(
            server().hits_of(path),
            1,
            "{path}: an oversize is not retried"
        );
    });
}

#[test]
fn endless_or_oversized_indexes_exceed_the_signed_size() {
    let list = [
        ("idx1", "ok", index("idx1"), Fault::Endless),
        ("idx2", "ok", index("idx2"), Fault::EndlessChunked),
        ("idx3", "ok", index("idx3"), Fault::HugeLength),
        ("idx4", "ok", index("idx4"), Fault::Long(1)),
        ("idx5", "ok", index("idx5"), Fault::LongUnannounced(1)),
        ("idx6", "ok", index("idx6"), Fault::Long(10 << 20)),
    ];
    cases(quick(), NO_STALL, &list, |path, fault, r, empty, _| {
        let size = size_of(path);
        let seen = match fault {
            Fault::HugeLength => "the server announces 10000000000 bytes".to_string(),
            Fault::Long(n) => format!("the server announces {} bytes", size + n as u64),
            _ => format!("the server sent more than {size} bytes"),
        };
        assert_eq!(
            r,
            Err(format!(
                "Download of `{}` exceeds the signed size of {size} bytes ({seen})",
                url(path)
            )),
            "{fault:?}"
        );
        assert!(empty);
    });
}

#[test]
fn an_index_decompressing_past_its_signed_size_is_refused() {
    for (suite, by) in [("bomb1", 1u64), ("bomb2", u64::MAX)] {
        let plain = size_of(&format!("/dists/{suite}/main/binary-amd64/Packages"));
        let signed = plain.saturating_sub(by);
        let (r, empty) = install(suite, "ok", quick());
        assert_eq!(
            r,
            Err(format!(
                "Invalid package index `{}`: it decompresses to more than the signed size of {signed} bytes",
                url(&index(suite))
            ))
        );
        assert!(empty);
    }
}

#[test]
fn oversized_debs_are_refused_and_nothing_written() {
    let list = [
        ("good", "long1", deb("long1"), Fault::Long(1)),
        ("good", "long2", deb("long2"), Fault::Long(1 << 20)),
        ("good", "longu", deb("longu"), Fault::LongUnannounced(1)),
        ("good", "endless", deb("endless"), Fault::Endless),
        ("good", "huge", deb("huge"), Fault::HugeLength),
    ];
    cases(quick(), NO_STALL, &list, |path, fault, r, empty, _| {
        let size = size_of(path);
        let e = r.unwrap_err();
        assert!(
            e.starts_with(&format!(
                "Download of `{}` exceeds the signed size of {size} bytes (the server ",
                url(path)
            )),
            "{fault:?}: {e}"
        );
        assert!(empty, "{path}");
        assert_eq!(server().hits_of(path), 1, "{path}");
    });
}

#[test]
fn undersized_downloads_are_retried_then_reported_as_truncated() {
    let list = [
        ("good", "short1", deb("short1"), Fault::ShortBy(1)),
        ("good", "short2", deb("short2"), Fault::ShortBy(usize::MAX)),
        ("good", "close0", deb("close0"), Fault::CloseAfter(0)),
        ("good", "close1", deb("close1"), Fault::CloseAfter(5000)),
        ("good", "trunc", deb("trunc"), Fault::Truncate),
        ("short1", "ok", index("short1"), Fault::ShortBy(10)),
    ];
    cases(quick(), NO_STALL, &list, |path, fault, r, empty, clock| {
        let size = size_of(path);
        let got = match fault {
            Fault::ShortBy(n) => size.saturating_sub(n as u64),
            Fault::CloseAfter(n) => n as u64,
            _ => size / 2,
        };
        assert_eq!(
            r,
            Err(format!(
                "Download of `{}` is truncated: got {got} of {size} bytes (after 3 attempts)",
                url(path)
            )),
            "{fault:?}"
        );
        assert!(empty, "{path}");
        assert_eq!(server().hits_of(path), 3, "{path}");
        assert_eq!(backoffs(clock), waits(&[20, 40]), "{path}");
    });
    // A root has no signed size: a body cut short of its Content-Length is a failed download.
    let path = inrelease("short2");
    server().fault(&path, Fault::CloseAfter(100));
    let (r, _) = install("short2", "ok", quick());
    let e = r.unwrap_err();
    assert!(
        e.starts_with(&format!(
            "Failed to download `{}` after 3 attempts: ",
            url(&path)
        )) && e.ends_with("after 100 bytes"),
        "{e}"
    );
}

/// The measured rate in a too-slow message.
fn measured_rate(e: &str) -> u64 {
    let open = e.rfind(" B/s), below").unwrap_or_else(|| panic!("{e}"));
    let start = e[..open].rfind('(').unwrap() + 1;
    e[start..open].parse().unwrap_or_else(|_| panic!("{e}"))
}

#[test]
fn drips_and_stalls_are_timed_out_with_the_measured_rate() {
    let limits = FetchLimits {
        attempts: 2,
        ..quick()
    };
    let list = [
        ("drip1", "ok", inrelease("drip1"), Fault::Drip(100)),
        ("drip2", "ok", index("drip2"), Fault::Drip(100)),
        ("drip3", "ok", inrelease("drip3"), Fault::StallInHead),
        ("good", "drip1", deb("drip1"), Fault::Drip(100)),
        ("good", "drip2", deb("drip2"), Fault::Drip(700)),
        ("good", "hang", deb("hang"), Fault::Hang),
    ];
    // A stalled socket (the head, the hang) waits a second of real time, then counts as the
    // window passing; one that stalls by chance under a drip is a stall, too slow alike.
    cases(
        limits,
        Duration::from_secs(1),
        &list,
        |path, fault, r, empty, _| {
            let e = r.unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "Download of `{}` is too slow after 2 attempts: ",
                    url(path)
                )) && e.ends_with(", below the minimum of 1000 B/s"),
                "{fault:?}: {e}"
            );
            assert!(measured_rate(&e) < 1000, "{e}");
            if matches!(fault, Fault::StallInHead | Fault::Hang) {
                assert!(e.contains(": 0 bytes in the last 1.0 s (0 B/s)"), "{e}");
            }
            assert!(empty);
            assert_eq!(server().hits_of(path), 2, "{path}");
        },
    );
}

#[test]
fn one_deadline_bounds_all_attempts() {
    // The progress rule never fires here (1 B/s); only the 1 s deadline can stop these.
    let limits = FetchLimits {
        window: Duration::from_secs(10),
        min_rate: 1,
        deadline_base: Duration::from_millis(1000),
        deadline_rate: 1 << 30,
        attempts: 10,
        backoff: Duration::from_millis(400),
        ..quick()
    };
    let list = [
        ("dl1", "ok", inrelease("dl1"), Fault::Drip(50)),
        ("good", "dl1", deb("dl1"), Fault::Drip(50)),
        ("dl2", "ok", inrelease("dl2"), Fault::Status(503)),
    ];
    cases(limits, NO_STALL, &list, |path, fault, r, empty, clock| {
        let e = r.unwrap_err();
        assert!(
            e.starts_with(&format!(
                "Download of `{}` did not finish within its deadline of 1.0 s (",
                url(path)
            )),
            "{fault:?}: {e}"
        );
        match fault {
            // Waits of 0 and 400 ms; the next one (800 ms) would pass the deadline.
            Fault::Status(_) => {
                assert!(
                    e.ends_with(
                        "(2 attempts, got 0 bytes, last: HTTP status 503 (Service Unavailable))"
                    ),
                    "{e}"
                );
                assert_eq!(backoffs(clock), waits(&[400]));
            }
            _ => assert!(e.contains("(1 attempt, got "), "{e}"),
        }
        assert!(empty);
    });
}

#[test]
fn server_errors_are_retried_with_backoff_then_named() {
    let list = [
        ("err1", "ok", inrelease("err1"), Fault::Status(503)),
        ("err2", "ok", index("err2"), Fault::Status(500)),
        ("good", "e429", deb("e429"), Fault::Status(429)),
        ("good", "e502", deb("e502"), Fault::Status(502)),
        ("good", "e403", deb("e403"), Fault::Status(403)),
    ];
    cases(quick(), NO_STALL, &list, |path, fault, r, empty, clock| {
        let Fault::Status(code) = fault else {
            unreachable!()
        };
        let (n, text) = match code {
            403 => (1, "1 attempt: HTTP status 403 (Forbidden)"),
            429 => (3, "3 attempts: HTTP status 429 (Too Many Requests)"),
            500 => (3, "3 attempts: HTTP status 500 (Internal Server Error)"),
            502 => (3, "3 attempts: HTTP status 502 (Bad Gateway)"),
            _ => (3, "3 attempts: HTTP status 503 (Service Unavailable)"),
        };
        assert_eq!(
            r,
            Err(format!("Failed to download `{}` after {text}", url(path)))
        );
        assert!(empty);
        assert_eq!(server().hits_of(path), n, "{path}");
        // Backoff of 20 + 40 ms between the three attempts.
        let expected = if n == 3 { waits(&[20, 40]) } else { waits(&[]) };
        assert_eq!(backoffs(clock), expected, "{path}");
    });
    // Fewer failures than attempts: the retry recovers.
    server().fault(&inrelease("err3"), Fault::StatusFirst(503, 2));
    server().fault(&deb("flaky"), Fault::StatusFirst(502, 2));
    let (r, empty) = install("err3", "flaky", quick());
    assert_eq!(r, Ok(()));
    assert!(!empty);
    assert_eq!(server().hits_of(&inrelease("err3")), 3);
    assert_eq!(server().hits_of(&deb("flaky")), 3);
}

#[test]
fn the_default_bounds_retry_four_times_with_doubling_backoff() {
    // The binary's own bounds, on a manual clock: 250 + 500 + 1000 ms asked for, none waited.
    let list = [("err4", "ok", inrelease("err4"), Fault::Status(503))];
    cases(
        FetchLimits::default(),
        NO_STALL,
        &list,
        |path, _, r, empty, clock| {
            assert_eq!(
                r,
                Err(format!(
                "Failed to download `{}` after 4 attempts: HTTP status 503 (Service Unavailable)",
                url(path)
            ))
            );
            assert!(empty);
            assert_eq!(server().hits_of(path), 4);
            assert_eq!(BACKOFF, Duration::from_millis(250));
            assert_eq!(backoffs(clock), waits(&[250, 500, 1000]));
        },
    );
}

/// Run `gpuimg` (default bounds) until it exits. Returns (exit code, stderr, peak resident
/// KiB). The peak is the kernel's account of the process's own (`common::peak`), exact however
/// short the peak was; a data limit of 1 GiB (`RLIMIT_DATA`) makes a run whose memory is not
/// bounded fail rather than take the machine's.
fn run_bounded(args: &[&str], dir: &Sandbox) -> (Option<i32>, String, u64) {
    let mut cmd = dir.gpuimg();
    cmd.args(args);
    let (out, peak_kb) = run_with_peak(&cmd, Some(1 << 30));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        peak_kb,
    )
}

fn profile_dir(suite: &str, package: &str) -> Sandbox {
    let t = Sandbox::new();
    std::fs::copy(&fixture().key, t.path().join("repo.gpg")).unwrap();
    common::write(
        &t.path().join("p.yaml"),
        &format!(
            "name: t\nbase:\n  apt:\n    mirror: {}\n    suite: {suite}\n    packages: [{package}]\n    keyring: repo.gpg\n",
            server().url
        ),
    );
    t
}

#[test]
fn the_binary_fails_fast_on_endless_bodies_with_bounded_memory() {
    let cap = MAX_ROOT_BYTES;
    let list = [
        ("bin1", "ok", inrelease("bin1"), Fault::Endless, "lock"),
        (
            "bin2",
            "ok",
            inrelease("bin2"),
            Fault::EndlessChunked,
            "lock",
        ),
        ("bin3", "ok", index("bin3"), Fault::Endless, "lock"),
        (
            "good",
            "bin-endless",
            deb("bin-endless"),
            Fault::Endless,
            "build",
        ),
        (
            "good",
            "bin-long",
            deb("bin-long"),
            Fault::LongUnannounced(64 << 20),
            "build",
        ),
    ];
    for (_, _, path, fault, _) in &list {
        server().fault(path, *fault);
    }
    for (suite, package, path, fault, cmd) in &list {
        let t = profile_dir(suite, package);
        let d = t.path();
        let (p, cache, out) = (d.join("p.yaml"), d.join("cache"), d.join("out"));
        let mut args = vec![
            *cmd,
            p.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ];
        if *cmd == "build" {
            args.extend(["-o", out.to_str().unwrap()]);
        }
        let (code, stderr, peak_kb) = run_bounded(&args, &t);
        let expected = if path.ends_with("InRelease") {
            format!("exceeds the cap of {cap} bytes (the server sent more than {cap} bytes)")
        } else {
            format!("exceeds the signed size of {} bytes (", size_of(path))
        };
        assert_eq!(code, Some(2), "{fault:?} {path}: {stderr}");
        assert!(
            stderr.contains(&format!("Download of `{}` {expected}", url(path))),
            "{fault:?} {path}: {stderr}"
        );
        assert_error(&without_sizes(&stderr), &[t.path()]);
        assert!(peak_kb < 150 << 10, "{path}: peak RSS {peak_kb} KiB");
        assert!(!out.exists(), "{path}: output written");
        assert!(!d.join("p.lock.json").exists() || *cmd == "build");
    }
}

#[test]
fn the_binary_names_the_status_and_attempts_of_a_503_storm() {
    let path = inrelease("bin4");
    server().fault(&path, Fault::Status(503));
    let t = profile_dir("bin4", "ok");
    let d = t.path();
    let (p, cache) = (d.join("p.yaml"), d.join("cache"));
    let (code, stderr, _) = run_bounded(
        &[
            "lock",
            p.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ],
        &t,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Failed to download `{}` after 4 attempts: HTTP status 503 (Service Unavailable)",
            url(&path)
        )),
        "{stderr}"
    );
    assert_error(&stderr, &[t.path()]);
    // The four attempts; their backoff schedule is the library's, asserted (with the same
    // default bounds) by `the_default_bounds_retry_four_times_with_doubling_backoff`.
    assert_eq!(server().hits_of(&path), 4);
    assert!(!d.join("p.lock.json").exists());
}
