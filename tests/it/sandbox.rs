//! The build sandbox (`gpuimg-sandbox`, issue 38): a command run in a busybox root file system
//! the test makes, and every confinement checked from inside and from the host: its log and
//! exit code, the environment exactly the one given, root inside mapped to an unprivileged id,
//! no network (a listener on the host's loopback unreachable, no interface but `lo`, down),
//! nothing written outside the output (the root, a read-only bind, a seeded scratch's source and
//! the host's `/tmp` unchanged, every write attempt failing), the output on the host only after
//! success, the time limit killing every process, the output's and the log's bounds.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuimg_sandbox::{Bind, Log, Output, SandboxError, Scratch, Spec, Status, Step};

use crate::common::busybox_rootfs;

/// The busybox applets the scripts below use, beside `busybox_rootfs`'s.
const APPLETS: [&str; 17] = [
    "sleep", "dd", "ip", "nc", "touch", "mkdir", "wc", "head", "seq", "hostname", "grep", "kill",
    "tail", "sort", "truncate", "mount", "umount",
];

/// A busybox root with the mount points the sandbox needs (`/dev`, `/proc`, `/build`, `/out`,
/// `/mnt/ro`), read-only to the sandbox.
fn sandbox_root(dir: &Path) -> PathBuf {
    let root = busybox_rootfs(dir);
    for a in APPLETS {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(a)).unwrap();
    }
    for d in ["dev", "proc", "build", "out", "mnt/ro"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    root
}

/// A spec running `script` with `/bin/sh -c` in `root`, output to `dir/out`, log `dir/log`.
fn spec(dir: &Path, root: &Path, script: &str) -> Spec {
    Spec {
        root: root.to_path_buf(),
        binds: vec![],
        scratch: vec![Scratch {
            inside: "/build".into(),
            max_bytes: 4 << 20,
            seed: None,
        }],
        output: Output {
            host: dir.join("out"),
            inside: "/out".into(),
            max_bytes: 4 << 20,
        },
        workdir: "/build".into(),
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![("PATH".into(), "/bin".into())],
        // Far above what any of these takes, even on a host that pauses the suite for minutes:
        // only the time-limit test relies on it.
        time_limit: Duration::from_secs(1800),
        log: Log {
            path: dir.join("log"),
            max_bytes: 1 << 20,
            tail_lines: 20,
        },
    }
}

/// Every path under `dir` with its kind, mode and content (or link target).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode();
            let what = if m.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else {
                let bytes = std::fs::read(&p).unwrap();
                format!(
                    "file {mode:o} {} {:?}",
                    bytes.len(),
                    &bytes[..bytes.len().min(64)]
                )
            };
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), what);
        }
    }
    out
}

#[test]
fn a_command_runs_confined_and_its_log_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let script = "echo hello; id -u; id -g; cat /proc/self/uid_map; echo pid $$; hostname; \
                  echo x > /dev/null && head -c 16 /dev/urandom | wc -c; ls /dev; pwd; \
                  echo to stderr >&2; echo result > /out/r";
    let ran = gpuimg_sandbox::run(&spec(d.path(), &root, script)).unwrap();
    assert_eq!(ran.status, Status::Exited(0));
    assert!(
        ran.user_namespace,
        "root's sandbox makes a user namespace here"
    );
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    let lines: Vec<&str> = log.lines().map(str::trim).collect();
    // Root inside is the user namespace's, mapped to nobody outside; the command is pid 2 (the
    // sandbox's init is 1); the host is named `sandbox`; /dev holds the five devices and links.
    let want = [
        "hello",
        "0",
        "0",
        "0      65534          1",
        "pid 2",
        "sandbox",
        "16",
    ];
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for (i, w) in want.iter().enumerate() {
        assert_eq!(squeeze(lines[i]), squeeze(w), "line {i} of:\n{log}");
    }
    let dev: Vec<&str> = lines[7..16].to_vec();
    assert_eq!(
        dev,
        ["fd", "full", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"],
        "{log}"
    );
    assert_eq!(lines[16], "/build");
    assert_eq!(lines[17], "to stderr");
    assert_eq!(ran.log_tail.last().map(String::as_str), Some("to stderr"));
    assert_eq!(ran.log_bytes, log.len() as u64);
    assert!(!ran.log_cut);
    assert_eq!(
        std::fs::read_to_string(d.path().join("out/r")).unwrap(),
        "result\n"
    );
}

#[test]
fn the_command_holds_no_capability_and_cannot_mount() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let script = "grep -E '^(Cap|NoNewPrivs)' /proc/self/status; cat /proc/self/cgroup; \
                  if mount -t tmpfs t /build; then echo MOUNTED; fi; \
                  if umount /mnt/ro || umount /proc; then echo UNMOUNTED; fi; \
                  if mount -o remount,rw /; then echo REMOUNTED; fi; ls /proc | grep -c '^[0-9]'";
    gpuimg_sandbox::run(&spec(d.path(), &root, script)).unwrap();
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            log.lines()
                .any(|l| l == format!("{set}:\t0000000000000000")),
            "{set}:\n{log}"
        );
    }
    assert!(log.contains("NoNewPrivs:\t1"), "{log}");
    // A cgroup namespace of its own: the host's cgroup path is not shown.
    assert!(log.lines().any(|l| l == "0::/"), "{log}");
    for done in ["MOUNTED", "UNMOUNTED", "REMOUNTED"] {
        assert!(!log.lines().any(|l| l == done), "{log}");
    }
    // The pid namespace: the init, the shell, `ls` and `grep`.
    assert_eq!(log.lines().last(), Some("4"), "{log}");
}

#[test]
fn the_environment_is_exactly_the_one_given() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let mut s = spec(d.path(), &root, "env | sort");
    s.env = vec![
        ("PATH".into(), "/bin".into()),
        ("SOURCE_DATE_EPOCH".into(), "1700000000".into()),
        ("KBUILD_BUILD_HOST".into(), "gpuimg".into()),
    ];
    let ran = gpuimg_sandbox::run(&s).unwrap();
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    // busybox sh adds PWD (and SHLVL), the shell's own; nothing of the test's environment.
    let got: Vec<&str> = log
        .lines()
        .filter(|l| !l.starts_with("PWD=") && !l.starts_with("SHLVL="))
        .collect();
    assert_eq!(
        got,
        [
            "KBUILD_BUILD_HOST=gpuimg",
            "PATH=/bin",
            "SOURCE_DATE_EPOCH=1700000000"
        ],
        "{log}"
    );
    assert_eq!(ran.status, Status::Exited(0));
}

#[test]
fn no_network_reaches_the_host() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "if echo hi | nc 127.0.0.1 {port}; then echo CONNECTED; else echo refused; fi; \
         echo ==dev; cat /proc/net/dev; echo ==ip; ip link"
    );
    gpuimg_sandbox::run(&spec(d.path(), &root, &script)).unwrap();
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    assert!(!log.contains("CONNECTED"), "{log}");
    assert!(log.contains("refused"), "{log}");
    // /proc/net/dev: two header lines, then one line per interface: `lo` alone.
    let dev = log
        .split("==dev\n")
        .nth(1)
        .unwrap()
        .split("==ip\n")
        .next()
        .unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim()))
        .collect();
    assert_eq!(ifaces, ["lo"], "{log}");
    // `ip link`: lo, and down.
    let lo = log.lines().find(|l| l.starts_with("1: lo:")).expect(&log);
    assert!(!lo.contains(",UP") && !lo.contains("<UP"), "{lo}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's listener was reached"
    );
}

#[test]
fn nothing_is_written_outside_the_output() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ro.join("header.h"), "#define X 1\n").unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("module.c"), "int x;\n").unwrap();
    std::fs::write(src.join("sub/Kbuild"), "obj-m := m.o\n").unwrap();
    std::os::unix::fs::symlink("module.c", src.join("link.c")).unwrap();
    let marker = format!("gpuimg-sandbox-{}", std::process::id());
    std::fs::create_dir(root.join("scratch")).unwrap();
    let before = (snapshot(&root), snapshot(&ro), snapshot(&src));
    let mut s = spec(
        d.path(),
        &root,
        &format!(
            "for p in /etc/x /x /bin/x /mnt/ro/x /mnt/ro/header.h /dev/x /proc/x /tmp/{marker}; do \
               if echo w > $p; then echo WROTE $p; fi; done; \
             if mkdir /newdir; then echo WROTE /newdir; fi; \
             if touch /bin/busybox; then echo WROTE touch; fi; \
             echo obj > /build/module.o; echo more >> /build/module.c; rm /build/sub/Kbuild; \
             cat /build/module.c /mnt/ro/header.h; cat /build/link.c; \
             echo scratch > /scratch/{marker}; cp /build/module.o /out/"
        ),
    );
    s.binds = vec![Bind {
        host: ro.clone(),
        inside: "/mnt/ro".into(),
    }];
    s.scratch[0].seed = Some(src.clone());
    s.scratch.push(Scratch {
        inside: "/scratch".into(),
        max_bytes: 1 << 20,
        seed: None,
    });
    gpuimg_sandbox::run(&s).unwrap();
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    assert!(!log.contains("WROTE"), "{log}");
    // Each refused write said why (read-only file system, or a missing directory of it).
    assert!(log.contains("Read-only file system"), "{log}");
    // The scratch held a copy of the seed, owned by root inside, and took the changes.
    assert!(
        log.contains("int x;\nmore\n#define X 1\nint x;\nmore\n"),
        "{log}"
    );
    let after = (snapshot(&root), snapshot(&ro), snapshot(&src));
    assert_eq!(before.0, after.0, "the root changed");
    assert_eq!(before.1, after.1, "the read-only bind changed");
    assert_eq!(before.2, after.2, "the seed changed");
    assert!(
        !Path::new("/tmp").join(&marker).exists(),
        "the host's /tmp was written"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("out/module.o")).unwrap(),
        "obj\n"
    );
}

#[test]
fn the_output_reaches_the_host_only_on_success_and_the_exit_code_and_tail_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let s = spec(
        d.path(),
        &root,
        "echo partial > /out/f; echo 'module.c:3: error: expected ;' >&2; exit 3",
    );
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    let SandboxError::Exited {
        code,
        output_full,
        ref tail,
        ..
    } = e
    else {
        panic!("{e}");
    };
    assert_eq!(code, 3);
    assert!(!output_full);
    assert_eq!(tail.0, ["module.c:3: error: expected ;"]);
    let shown = e.to_string();
    assert!(
        shown.contains("exited with code 3") && shown.contains("| module.c:3: error: expected ;"),
        "{shown}"
    );
    assert!(
        !d.path().join("out").exists(),
        "a failed run's output reached the host"
    );
    // A signal is reported as one.
    let e = gpuimg_sandbox::run(&spec(d.path(), &root, "echo going; kill -9 $$")).unwrap_err();
    assert!(
        matches!(e, SandboxError::Signaled { signal: 9, ref tail, .. } if tail.0 == ["going"]),
        "{e}"
    );
    assert!(!d.path().join("out").exists());
}

/// The pids of the host's processes whose command line is `argv`.
fn processes_running(argv: &[&str]) -> Vec<String> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_time_limit_kills_the_command_and_every_process_it_started() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    // Background sleeps, one of them orphaned to the sandbox's init, and the shell's own; their
    // length is this process's own (another run of the suite beside this one has another).
    let n = (1_000_000 + std::process::id()).to_string();
    let mut s = spec(
        d.path(),
        &root,
        &format!("sleep {n} & (sleep {n} &); (trap '' TERM; sleep {n}) & echo started; sleep {n}"),
    );
    s.time_limit = Duration::from_secs(2);
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    assert!(
        matches!(e, SandboxError::TimedOut { ref tail, .. } if tail.0 == ["started"]),
        "{e}"
    );
    assert_eq!(
        processes_running(&["sleep", &n]),
        Vec::<String>::new(),
        "a process of the sandbox survived it"
    );
    assert!(!d.path().join("out").exists());
}

#[test]
fn the_output_bound_stops_a_writer_past_it() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let mut s = spec(
        d.path(),
        &root,
        "dd if=/dev/zero of=/out/big bs=65536 count=64",
    );
    s.output.max_bytes = 1 << 20;
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    let SandboxError::Exited {
        output_full,
        ref tail,
        ..
    } = e
    else {
        panic!("{e}");
    };
    assert!(output_full, "{e}");
    assert!(
        tail.0.iter().any(|l| l.contains("No space left on device")),
        "{e}"
    );
    assert!(e.to_string().contains("reached its bound"), "{e}");
    assert!(!d.path().join("out").exists());
    // A sparse file longer than the bound (the tmpfs holds its few pages) is refused, not
    // copied out at its length.
    let mut s = spec(
        d.path(),
        &root,
        "set -e; truncate -s 1099511627776 /out/sparse; echo x > /out/x",
    );
    s.output.max_bytes = 1 << 20;
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    assert!(
        matches!(e, SandboxError::OutputTooLarge { ref path, max } if path.ends_with("sparse") && max == 1 << 20),
        "{e}"
    );
    assert!(!d.path().join("out").exists());
    // A scratch's bound holds the same way.
    let mut s = spec(
        d.path(),
        &root,
        "dd if=/dev/zero of=/build/big bs=65536 count=128",
    );
    s.scratch[0].max_bytes = 1 << 20;
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    assert!(e.to_string().contains("No space left on device"), "{e}");
}

#[test]
fn a_log_past_its_bound_is_cut_and_its_end_kept() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let mut s = spec(d.path(), &root, "seq 1 100000");
    s.log.max_bytes = 4096;
    s.log.tail_lines = 2;
    let ran = gpuimg_sandbox::run(&s).unwrap();
    assert!(ran.log_cut);
    assert_eq!(ran.log_tail, ["99999", "100000"]);
    let total: u64 = (1..=100000u64)
        .map(|n| n.to_string().len() as u64 + 1)
        .sum();
    assert_eq!(ran.log_bytes, total);
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    assert!(log.len() < 4096 + 100, "{}", log.len());
    assert!(log.ends_with("[gpuimg: the log was cut at its bound of 4096 bytes]\n"));
}

#[test]
fn a_mount_point_the_root_lacks_is_named() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let mut s = spec(d.path(), &root, "true");
    s.output.inside = "/nowhere".into();
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    assert!(
        matches!(e, SandboxError::Setup { step: Step::MountInside, path: Some(ref p), .. } if p == Path::new("/nowhere")),
        "{e}"
    );
    // A command that is not there is named too.
    let mut s = spec(d.path(), &root, "true");
    s.argv = vec![OsString::from("/bin/make")];
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    assert!(
        matches!(
            e,
            SandboxError::Setup {
                step: Step::Exec,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("/bin/make"), "{e}");
}

/// A Debian root from the build host's apt sources (`mirror: host`, bookworm) with `packages`,
/// the sandbox's mount points added.
fn debian_root(dest: &Path, packages: &str) {
    use gpuimg_apt::{self as apt, AptOptions, DebianArch, Mirror, PackagesSpec};
    use gpuimg_fetch::observe::Silent;
    let spec = PackagesSpec {
        mirror: Mirror::Host,
        suite: "bookworm".to_string(),
        components: vec!["main".to_string()],
        keyring: None,
        trusted: false,
        essential: false,
        packages: packages.split(", ").map(String::from).collect(),
        repositories: Vec::new(),
        system: false,
    };
    let arch = DebianArch::from_oci("amd64");
    let opts = AptOptions::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join("sandbox-apt-cache"));
    let locked = apt::resolve(&spec, &arch, &opts, &mut Silent).unwrap();
    std::fs::create_dir_all(dest).unwrap();
    apt::install(&spec, &arch, &opts, Some(&locked), dest, &mut Silent).unwrap();
    for d in ["dev", "proc", "tmp", "build", "out", "mnt/ro"] {
        std::fs::create_dir_all(dest.join(d)).unwrap();
    }
}

#[test]
fn make_and_gcc_build_a_program_in_a_debian_root() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("debian");
    debian_root(&root, "dash, coreutils, make, gcc, libc6-dev");
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(
        src.join("hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello from the sandbox\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("Makefile"),
        "hello: hello.c\n\tgcc -O2 -o $@ $<\n\tcp $@ /out/\n",
    )
    .unwrap();
    let mut s = spec(d.path(), &root, "make");
    s.argv = vec!["/usr/bin/make".into()];
    s.scratch[0].seed = Some(src.clone());
    // The compiler's temporary files.
    s.scratch.push(Scratch {
        inside: "/tmp".into(),
        max_bytes: 64 << 20,
        seed: None,
    });
    s.env.push(("LC_ALL".into(), "C".into()));
    s.env[0].1 = "/usr/bin:/bin".into();
    let ran = gpuimg_sandbox::run(&s).unwrap();
    assert!(
        ran.log_tail
            .iter()
            .any(|l| l.starts_with("gcc -O2 -o hello")),
        "{:?}",
        ran.log_tail
    );
    // The program runs, from the output bound read-only into a second sandbox.
    let out = d.path().join("out");
    let mut s = spec(d.path(), &root, "");
    s.output.host = d.path().join("out2");
    s.argv = vec!["/mnt/ro/hello".into()];
    s.binds = vec![Bind {
        host: out,
        inside: "/mnt/ro".into(),
    }];
    let ran = gpuimg_sandbox::run(&s).unwrap();
    assert_eq!(ran.log_tail, ["hello from the sandbox"]);
    // A compile error fails the run with the compiler's last lines.
    std::fs::write(src.join("hello.c"), "int main(void) { return x; }\n").unwrap();
    let mut s = spec(d.path(), &root, "make");
    s.output.host = d.path().join("out3");
    s.argv = vec!["/usr/bin/make".into()];
    s.scratch[0].seed = Some(src);
    s.scratch.push(Scratch {
        inside: "/tmp".into(),
        max_bytes: 64 << 20,
        seed: None,
    });
    s.env[0].1 = "/usr/bin:/bin".into();
    let e = gpuimg_sandbox::run(&s).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("exited with code 2") && shown.contains("'x' undeclared"),
        "{shown}"
    );
    assert!(!d.path().join("out3").exists());
}

/// The sandbox is cloned from a process whose other threads hold whatever locks they hold at
/// that moment (glibc's own among them): its child must take none. Many sandboxes at once from
/// many threads, while other threads come and go and allocate, all end as they should (a child
/// stuck on a lock would end in the time limit instead).
#[test]
fn sandboxes_cloned_from_many_busy_threads_all_end() {
    let d = tempfile::tempdir().unwrap();
    let root = sandbox_root(d.path());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::spawn(|| vec![0u8; 1 << 16].len())
                        .join()
                        .unwrap();
                }
            });
        }
        let runners: Vec<_> = (0..6)
            .map(|t| {
                let (dir, root) = (d.path(), &root);
                scope.spawn(move || -> Result<(), String> {
                    for i in 0..5 {
                        let mut s = spec(dir, root, "echo done > /out/done");
                        s.output.host = dir.join(format!("out-{t}-{i}"));
                        s.log.path = dir.join(format!("log-{t}-{i}"));
                        s.time_limit = Duration::from_secs(600);
                        gpuimg_sandbox::run(&s).map_err(|e| format!("run {t}-{i}: {e}"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        let ended: Vec<_> = runners.into_iter().map(|r| r.join()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for e in ended {
            e.unwrap().unwrap();
        }
    });
    for t in 0..6 {
        for i in 0..5 {
            let done = d.path().join(format!("out-{t}-{i}/done"));
            assert_eq!(std::fs::read_to_string(done).unwrap(), "done\n");
        }
    }
}
