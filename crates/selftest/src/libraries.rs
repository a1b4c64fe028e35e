//! The image's CUDA libraries at start: each loaded (`dlopen` by its path in the image, in the
//! expectation's load order) and asked its version through its own call.
//!
//! Returns what each reported (the fields of its version) or why it could not be loaded or
//! asked; pass/fail is decided in `carried`. Loaded libraries stay loaded for the life of the
//! process (unloading CUDA libraries is unsafe with their threads); nothing is called but the
//! version functions, which need no driver and no GPU. Before any is mapped, every file of the
//! list (and its companions) has its program headers checked against its size (`segments`):
//! when one is cut short, none is loaded (a library maps its dependencies, others of the list,
//! when it loads) and the probe says why, instead of the process dying of SIGBUS.

use std::ffi::{c_int, c_uint};
use std::path::Path;
use std::time::Instant;

use libloading::Library;
use serde::{Deserialize, Serialize};

use super::segments;
use gpuimg_expect::{LibraryExpectation, VersionCall};

/// What loading one library and calling its version function gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LibraryProbe {
    /// The catalog key (`cudart`).
    pub name: String,
    /// The path loaded.
    pub path: String,
    /// The version fields the call reported (`[12, 4]`); `None` when it could not be asked.
    pub reported: Option<Vec<u64>>,
    /// The call's raw answer (`12040`), for the report.
    pub raw: Option<String>,
    /// Why it could not be loaded or asked.
    pub error: Option<String>,
    /// Time to load and ask, ms.
    pub ms: f64,
}

/// Load each library in order and ask its version; when the program headers of any of them
/// (or of a companion) reach past the end of its file, load none of them.
pub fn probe_all(libs: &[LibraryExpectation]) -> Vec<LibraryProbe> {
    let cut: Vec<Option<String>> = libs.iter().map(unmappable).collect();
    let first = libs.iter().zip(&cut).find(|(_, c)| c.is_some());
    let Some((bad, _)) = first else {
        return libs.iter().map(probe).collect();
    };
    libs.iter()
        .zip(cut)
        .map(|(lib, why)| LibraryProbe {
            name: lib.name.clone(),
            path: lib.path(),
            error: Some(why.unwrap_or_else(|| {
                format!(
                    "Not loaded: `{}` ({}) of this image is truncated, and loading this library could map it",
                    bad.soname, bad.name
                )
            })),
            ..LibraryProbe::default()
        })
        .collect()
}

/// Why `lib` or one of its companions must not be mapped (`segments::check`), if so.
fn unmappable(lib: &LibraryExpectation) -> Option<String> {
    if let Err(e) = segments::check(Path::new(&lib.path())) {
        return Some(e.to_string());
    }
    lib.companions.iter().find_map(|name| {
        let path = format!("{}/{name}", lib.dir.trim_end_matches('/'));
        segments::check(Path::new(&path))
            .err()
            .map(|e| format!("`{name}`, which it loads at run time: {e}"))
    })
}

fn probe(lib: &LibraryExpectation) -> LibraryProbe {
    let start = Instant::now();
    let path = lib.path();
    let mut p = LibraryProbe {
        name: lib.name.clone(),
        path: path.clone(),
        ..LibraryProbe::default()
    };
    // SAFETY: loading a CUDA library runs its initialisers, as any CUDA program does; the
    // path is the one the image's expectation names.
    match unsafe { Library::new(&path) } {
        Err(e) => p.error = Some(format!("dlopen failed: {e}")),
        Ok(handle) => {
            match ask(&handle, lib.call) {
                Ok((fields, raw)) => {
                    p.reported = Some(fields);
                    p.raw = Some(raw);
                }
                Err(e) => p.error = Some(e),
            }
            // Never unloaded: the library's threads and atexit handlers may still need it.
            std::mem::forget(handle);
            if p.error.is_none() {
                p.error = companions(lib);
            }
        }
    }
    p.ms = start.elapsed().as_secs_f64() * 1000.0;
    p
}

/// Load the libraries `lib` loads itself at run time; why the first that fails does.
fn companions(lib: &LibraryExpectation) -> Option<String> {
    for name in &lib.companions {
        let path = format!("{}/{name}", lib.dir.trim_end_matches('/'));
        // SAFETY: as for the library itself: a CUDA library of the image, by its path.
        match unsafe { Library::new(&path) } {
            Ok(h) => std::mem::forget(h),
            Err(e) => return Some(format!("`{name}`, which it loads at run time: {e}")),
        }
    }
    None
}

type IntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
type TwoIntOut = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type TwoUintOut = unsafe extern "C" fn(*mut c_uint, *mut c_uint) -> c_int;
type SizeRet = unsafe extern "C" fn() -> usize;
type Property = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;

/// `libraryPropertyType`: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL.
const PROPERTIES: [c_int; 3] = [0, 1, 2];

/// Call `call` in `lib`: the version fields and the raw answer.
fn ask(lib: &Library, call: VersionCall) -> Result<(Vec<u64>, String), String> {
    let symbol = call.symbol();
    let missing = |e: libloading::Error| format!("`{symbol}` not found: {e}");
    let failed = |status: c_int| format!("`{symbol}` returned status {status}");
    // SAFETY: each type is the C signature the library's header declares for `symbol`; the
    // out-pointers are valid for the call.
    unsafe {
        match call {
            VersionCall::CudaRuntimeGetVersion => {
                let f = *lib.get::<IntOut>(symbol.as_bytes()).map_err(missing)?;
                let mut v: c_int = 0;
                let s = f(&mut v);
                if s != 0 {
                    return Err(failed(s));
                }
                let v = non_negative(v)?;
                Ok((vec![v / 1000, (v % 1000) / 10], v.to_string()))
            }
            VersionCall::NvrtcVersion => {
                let f = *lib.get::<TwoIntOut>(symbol.as_bytes()).map_err(missing)?;
                let (mut a, mut b): (c_int, c_int) = (0, 0);
                let s = f(&mut a, &mut b);
                if s != 0 {
                    return Err(failed(s));
                }
                let (a, b) = (non_negative(a)?, non_negative(b)?);
                Ok((vec![a, b], format!("{a}.{b}")))
            }
            VersionCall::NvJitLinkVersion => {
                let f = *lib.get::<TwoUintOut>(symbol.as_bytes()).map_err(missing)?;
                let (mut a, mut b): (c_uint, c_uint) = (0, 0);
                let s = f(&mut a, &mut b);
                if s != 0 {
                    return Err(failed(s));
                }
                Ok((vec![a.into(), b.into()], format!("{a}.{b}")))
            }
            VersionCall::CublasLtGetVersion => {
                let f = *lib.get::<SizeRet>(symbol.as_bytes()).map_err(missing)?;
                let v = f() as u64;
                Ok((by_hundreds(v), v.to_string()))
            }
            VersionCall::CudnnGetVersion => {
                let f = *lib.get::<SizeRet>(symbol.as_bytes()).map_err(missing)?;
                let v = f() as u64;
                // cuDNN 9 encodes major·10000; 8 and older major·1000.
                let fields = if v >= 90_000 {
                    by_hundreds(v)
                } else {
                    by_thousand(v)
                };
                Ok((fields, v.to_string()))
            }
            VersionCall::CublasGetProperty | VersionCall::CusparseGetProperty => {
                let f = *lib.get::<Property>(symbol.as_bytes()).map_err(missing)?;
                let mut fields = Vec::new();
                for p in PROPERTIES {
                    let mut v: c_int = 0;
                    let s = f(p, &mut v);
                    if s != 0 {
                        return Err(failed(s));
                    }
                    fields.push(non_negative(v)?);
                }
                let raw = fields
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(".");
                Ok((fields, raw))
            }
            VersionCall::NcclGetVersion
            | VersionCall::CufftGetVersion
            | VersionCall::CurandGetVersion
            | VersionCall::CusolverGetVersion => {
                let f = *lib.get::<IntOut>(symbol.as_bytes()).map_err(missing)?;
                let mut v: c_int = 0;
                let s = f(&mut v);
                if s != 0 {
                    return Err(failed(s));
                }
                let v = non_negative(v)?;
                // NCCL 2.9 and newer encode major·10000 (22809 is 2.28.9).
                let fields = if call == VersionCall::NcclGetVersion && v >= 20_900 {
                    by_hundreds(v)
                } else {
                    by_thousand(v)
                };
                Ok((fields, v.to_string()))
            }
        }
    }
}

fn non_negative(v: c_int) -> Result<u64, String> {
    u64::try_from(v).map_err(|_| format!("negative version {v}"))
}

/// major·10000 + minor·100 + patch.
fn by_hundreds(v: u64) -> Vec<u64> {
    vec![v / 10_000, (v / 100) % 100, v % 100]
}

/// major·1000 + minor·100 + patch.
fn by_thousand(v: u64) -> Vec<u64> {
    vec![v / 1000, (v % 1000) / 100, v % 100]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_decode_as_the_headers_define_them() {
        assert_eq!(by_hundreds(130_100), [13, 1, 0]);
        assert_eq!(by_hundreds(91_900), [9, 19, 0]);
        assert_eq!(by_hundreds(22_809), [2, 28, 9]);
        assert_eq!(by_thousand(12_000), [12, 0, 0]);
        assert_eq!(by_thousand(11_703), [11, 7, 3]);
        assert_eq!(by_thousand(8_907), [8, 9, 7]);
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let lib = LibraryExpectation {
            name: "cudart".into(),
            soname: "libcudart.so.99".into(),
            dir: "/nonexistent/gpuimg".into(),
            version: "99.0.1".into(),
            provider: "wheel x".into(),
            cuda_major: 99,
            call: VersionCall::CudaRuntimeGetVersion,
            level: gpuimg_expect::SelftestLevel::Quick,
            companions: vec![],
        };
        let p = probe_all(std::slice::from_ref(&lib));
        assert_eq!(p[0].path, "/nonexistent/gpuimg/libcudart.so.99");
        assert!(p[0].reported.is_none());
        assert!(p[0].error.as_deref().unwrap().starts_with("dlopen failed"));
    }
}
