//! What the arm64 tests share: the arm64 self-test built once per test process with the
//! repository's script (`scripts/build-selftest-arm64.sh`), and `qemu-aarch64-static`
//! registered with the kernel's `binfmt_misc` for as long as a test holds [`Binfmt`], so that
//! podman can start arm64 images on this amd64 host. Nothing on these machines registers
//! qemu-user with the kernel; the guard leaves the machine as it found it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::{require, run_ok, which};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds (or, when up to date, finds) the arm64 self-test with the repository's script, once
/// per test process.
pub fn arm64_selftest() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = root().join("target/arm64/gpuimg-selftest");
            run_ok(
                Command::new("bash")
                    .arg(root().join("scripts/build-selftest-arm64.sh"))
                    .arg(&out),
            );
            out
        })
        .clone()
}

const BINFMT: &str = "/proc/sys/fs/binfmt_misc";
const NAME: &str = "qemu-aarch64";

/// `qemu-aarch64-static` registered for aarch64 ELF files (flag `F`: the kernel opens the
/// interpreter now, so it works inside containers), undone on drop: the entry is removed if
/// this guard added it, `binfmt_misc` unmounted if this guard mounted it. Tests that hold one
/// run one at a time.
pub struct Binfmt {
    added: bool,
    mounted: bool,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Binfmt {
    pub fn register() -> Binfmt {
        static TURN: Mutex<()> = Mutex::new(());
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        require("qemu-aarch64-static");
        let interpreter = which("qemu-aarch64-static");
        let mut mounted = false;
        if !Path::new(BINFMT).join("register").exists() {
            run_ok(Command::new("mount").args(["-t", "binfmt_misc", "binfmt_misc", BINFMT]));
            mounted = true;
        }
        let entry = Path::new(BINFMT).join(NAME);
        let added = !entry.exists();
        if added {
            // ELF64, little-endian, e_machine 183 (EM_AARCH64), executable or shared object.
            let magic = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00";
            let mask =
                r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff";
            let line = format!(":{NAME}:M::{magic}:{mask}:{}:F", interpreter.display());
            std::fs::write(Path::new(BINFMT).join("register"), line)
                .unwrap_or_else(|e| panic!("registering {NAME} with binfmt_misc: {e}"));
        }
        Binfmt {
            added,
            mounted,
            _turn: turn,
        }
    }
}

impl Drop for Binfmt {
    fn drop(&mut self) {
        if self.added {
            let _ = std::fs::write(Path::new(BINFMT).join(NAME), "-1");
        }
        if self.mounted {
            let _ = Command::new("umount").arg(BINFMT).status();
        }
    }
}
