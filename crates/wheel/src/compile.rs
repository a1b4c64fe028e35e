//! `python.compile: true`: deterministic `unchecked-hash` `.pyc` files (PEP 552), written by a
//! host CPython whose bytecode magic number is the image's, on the staging copy of the wheels.
//!
//! Compiling is not executing: the host interpreter runs `py_compile` from its own standard
//! library over the staged sources, isolated (`-I`: no `PYTHON*` variables, no user site, no
//! working directory or script directory on `sys.path`; `-S`: no site) and started from a
//! fresh empty directory, so no package, image or working-directory code runs. Each `.pyc` names its source by its image path (`dfile`), never the staging path.
//! Determinism: `PYTHONHASHSEED=0` (set constants are marshalled in hash order), the
//! environment otherwise empty, and the files cut into fixed chunks of [`CHUNK`] in sorted
//! order, one process each, whatever the number of threads. The image's magic number comes
//! from [`MAGIC`] (CPython's final releases); the host's from the interpreter itself.

use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::WheelError;
use gpuimg_pypi::ImagePython;

/// `importlib.util.MAGIC_NUMBER` of CPython's final releases, by minor version (it is frozen
/// at each minor's first release candidate).
pub const MAGIC: &[((u32, u32), u16)] = &[
    ((3, 8), 3413),
    ((3, 9), 3425),
    ((3, 10), 3439),
    ((3, 11), 3495),
    ((3, 12), 3531),
    ((3, 13), 3571),
];

/// Sources per compiling process.
pub const CHUNK: usize = 256;

/// How long one probe of a candidate interpreter may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long compiling one chunk may take.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(600);

/// The bytecode magic number of CPython `version`, when known.
pub fn magic_of(version: (u32, u32)) -> Option<u16> {
    MAGIC.iter().find(|(v, _)| *v == version).map(|(_, m)| *m)
}

/// A host CPython whose bytecode is the image's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPython {
    /// The real executable (`sys.executable`), not a shim that found it.
    pub path: PathBuf,
    /// `3.11.2`.
    pub version: String,
    pub magic: u16,
}

const PROBE: &str = "import sys, importlib.util\n\
sys.stdout.write('%s %d.%d.%d %d %s' % ((sys.implementation.name,) + tuple(sys.version_info[:3]) + \
(int.from_bytes(importlib.util.MAGIC_NUMBER[:2], 'little'), sys.executable)))";

impl HostPython {
    /// Find, in the directories of the host's `PATH` (`search`), a CPython whose magic number
    /// is the image's: `python3.X` first, then `python3`; of those that match, the one of the
    /// image's exact version if there is one (its `.pyc` are the image's own), else the first.
    pub fn find(search: &[PathBuf], image: &ImagePython) -> Result<HostPython, WheelError> {
        let (major, minor) = image.version;
        let version = format!("{major}.{minor}");
        let magic = magic_of(image.version).ok_or_else(|| WheelError::UnknownMagic {
            version: version.clone(),
        })?;
        let mut tried = Vec::new();
        let mut found: Vec<HostPython> = Vec::new();
        let iso = gpuimg_fetch::host_program::Isolated::new().map_err(|e| WheelError::Compile {
            interpreter: version.clone(),
            why: format!("no empty directory to start it from: {e}"),
        })?;
        for name in [format!("python{version}"), "python3".to_string()] {
            for dir in search.iter().filter(|d| d.is_absolute()) {
                let cand = dir.join(&name);
                if !cand.is_file() {
                    continue;
                }
                tried.push(cand.display().to_string());
                let Some(h) = probe(&iso, &cand) else {
                    continue;
                };
                if h.magic == magic && !found.iter().any(|f| f.path == h.path) {
                    found.push(h);
                }
            }
        }
        if let Some(i) = found.iter().position(|h| h.version == image.full_version) {
            return Ok(found.swap_remove(i));
        }
        found
            .into_iter()
            .next()
            .ok_or_else(|| WheelError::NoHostPython {
                version,
                magic: format!(" (magic number {magic})"),
                tried: if tried.is_empty() {
                    String::new()
                } else {
                    format!(" (tried `{}`)", tried.join("`, `"))
                },
            })
    }
}

/// Ask `cand` what it is; `None` when it is not a working CPython.
fn probe(iso: &gpuimg_fetch::host_program::Isolated, cand: &Path) -> Option<HostPython> {
    // The host's own environment: a version manager's shim needs it to find the interpreter.
    let mut cmd = iso.command(cand)?;
    cmd.args(["-I", "-S", "-c", PROBE]);
    let (ok, out, _) = run(cmd, Vec::new(), PROBE_TIMEOUT).ok()?;
    if !ok {
        return None;
    }
    let text = String::from_utf8(out).ok()?;
    let mut parts = text.splitn(4, ' ');
    let (imp, version, magic, exe) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if imp != "cpython" || exe.is_empty() {
        return None;
    }
    Some(HostPython {
        path: PathBuf::from(exe),
        version: version.to_string(),
        magic: magic.parse().ok()?,
    })
}

/// One source to compile.
#[derive(Debug, Clone)]
pub struct Source {
    /// The staged `.py`.
    pub src: PathBuf,
    /// Its path in the image, recorded in the `.pyc`.
    pub dfile: String,
    /// Where the `.pyc` goes in staging.
    pub cfile: PathBuf,
}

/// The interpreter's cache tag in `.pyc` names (`cpython-311`).
pub fn cache_tag(version: (u32, u32)) -> String {
    format!("cpython-{}{}", version.0, version.1)
}

/// The `.pyc` of the image path `dest` (`a/b.py` → `a/__pycache__/b.cpython-311.pyc`), for a
/// `.py` file.
pub fn pyc_path(dest: &str, version: (u32, u32)) -> Option<String> {
    let stem = dest.strip_suffix(".py")?;
    let (dir, name) = stem.rsplit_once('/').unwrap_or(("", stem));
    if name.is_empty() {
        return None;
    }
    let tag = cache_tag(version);
    Some(if dir.is_empty() {
        format!("__pycache__/{name}.{tag}.pyc")
    } else {
        format!("{dir}/__pycache__/{name}.{tag}.pyc")
    })
}

const SCRIPT: &str = "import os, sys, py_compile\n\
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH\n\
items = sys.stdin.buffer.read().split(b'\\0')\n\
for i in range(0, len(items) - 2, 3):\n    \
src, dfile, cfile = (os.fsdecode(x) for x in items[i:i + 3])\n    \
try:\n        \
py_compile.compile(src, cfile=cfile, dfile=dfile, doraise=True, optimize=0, invalidation_mode=mode)\n    \
except py_compile.PyCompileError:\n        \
sys.stdout.buffer.write(items[i + 1] + b'\\0')\n";

/// Compile `sources` with `host`; returns, per source, whether it compiled (a source that is
/// not valid Python for this version is left without a `.pyc`, as pip leaves it).
pub fn compile(host: &HostPython, sources: &[Source]) -> Result<Vec<bool>, WheelError> {
    let iso = gpuimg_fetch::host_program::Isolated::new().map_err(|e| WheelError::Compile {
        interpreter: host.path.display().to_string(),
        why: format!("no empty directory to start it from: {e}"),
    })?;
    let chunks: Vec<&[Source]> = sources.chunks(CHUNK).collect();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<ChunkResult>>> =
        std::sync::Mutex::new((0..chunks.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(chunks.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(chunk) = chunks.get(k) else { break };
                let r = compile_chunk(&iso, host, chunk);
                let mut g = results.lock().unwrap_or_else(|e| e.into_inner());
                g[k] = Some(r);
            });
        }
    });
    let mut out = Vec::with_capacity(sources.len());
    for r in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        out.extend(r.ok_or(WheelError::Internal("a compile chunk did not run"))??);
    }
    Ok(out)
}

/// Per source of a chunk, whether it compiled.
type ChunkResult = Result<Vec<bool>, WheelError>;

fn compile_chunk(
    iso: &gpuimg_fetch::host_program::Isolated,
    host: &HostPython,
    chunk: &[Source],
) -> Result<Vec<bool>, WheelError> {
    let fail = |why: String| WheelError::Compile {
        interpreter: host.path.display().to_string(),
        why,
    };
    let mut input = Vec::new();
    for s in chunk {
        for part in [
            s.src.as_os_str().as_bytes(),
            s.dfile.as_bytes(),
            s.cfile.as_os_str().as_bytes(),
        ] {
            if part.contains(&0) {
                return Err(fail(format!("`{}` holds a NUL byte", s.dfile)));
            }
            input.extend_from_slice(part);
            input.push(0);
        }
    }
    let mut cmd = iso
        .command(&host.path)
        .ok_or_else(|| fail("the interpreter's path is not absolute".into()))?;
    cmd.args(["-I", "-S", "-c", SCRIPT])
        .env_clear()
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LC_ALL", "C.UTF-8");
    let (ok, out, err) = run(cmd, input, CHUNK_TIMEOUT).map_err(|e| fail(e.to_string()))?;
    if !ok {
        let err = String::from_utf8_lossy(&err);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("it exited with an error");
        return Err(fail(last.trim().to_string()));
    }
    let failed: std::collections::HashSet<&[u8]> =
        out.split(|b| *b == 0).filter(|s| !s.is_empty()).collect();
    Ok(chunk
        .iter()
        .map(|s| !failed.contains(s.dfile.as_bytes()))
        .collect())
}

/// Run `cmd` with `input` on stdin, within `timeout` (then it is killed): (success, stdout,
/// stderr).
fn run(
    mut cmd: Command,
    input: Vec<u8>,
    timeout: Duration,
) -> std::io::Result<(bool, Vec<u8>, Vec<u8>)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let deadline = Instant::now() + timeout;
    let (out, err, status) = std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(i) = stdin.as_mut() {
                let _ = i.write_all(&input);
            }
            drop(stdin);
        });
        let out = s.spawn(move || {
            let mut b = Vec::new();
            if let Some(o) = stdout.as_mut() {
                let _ = o.read_to_end(&mut b);
            }
            b
        });
        let err = s.spawn(move || {
            let mut b = Vec::new();
            if let Some(e) = stderr.as_mut() {
                let _ = e.take(1 << 20).read_to_end(&mut b);
            }
            b
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Ok(st),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("it ran past {} s and was stopped", timeout.as_secs()),
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => break Err(e),
            }
        };
        (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
            status,
        )
    });
    Ok((status?.success(), out, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pyc_paths_use_the_image_cache_tag() {
        assert_eq!(
            pyc_path("usr/lib/x/a/b.py", (3, 11)).as_deref(),
            Some("usr/lib/x/a/__pycache__/b.cpython-311.pyc")
        );
        assert_eq!(
            pyc_path("b.py", (3, 12)).as_deref(),
            Some("__pycache__/b.cpython-312.pyc")
        );
        assert_eq!(pyc_path("a/b.pyi", (3, 11)), None);
        assert_eq!(pyc_path("a/.py", (3, 11)), None);
    }

    #[test]
    fn magic_numbers_are_known_for_the_pythons_debian_and_ubuntu_ship() {
        assert_eq!(magic_of((3, 11)), Some(3495));
        assert_eq!(magic_of((3, 13)), Some(3571));
        assert_eq!(magic_of((2, 7)), None);
    }
}
