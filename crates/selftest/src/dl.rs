//! Run-time loading of the driver's libraries (`dlopen`), so no CUDA toolkit is needed to build.
//!
//! A missing library or symbol is an error value, never a panic; the error says what was
//! measured (no file, a file `dlopen` refused, or the symbol it lacks), never a guessed cause.
//! Loaded libraries are kept for the life of the process (the fn pointers taken from them must
//! stay valid).

use libloading::Library;
use serde::{Deserialize, Serialize};

/// Why a driver library could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum LoadError {
    /// The dynamic loader found no file of that name.
    #[error("`{library}` not found")]
    NotFound { library: String },
    /// A file was found, but `dlopen` refused it (its message).
    #[error("`{library}` does not load: {reason}")]
    Refused { library: String, reason: String },
    /// It loaded, but lacks a function the self-test calls.
    #[error("`{library}` lacks `{symbol}`")]
    Symbol { library: String, symbol: String },
}

/// Open a shared library by soname.
pub fn open(soname: &'static str) -> Result<Library, LoadError> {
    // SAFETY: loading the NVIDIA driver libraries runs their initialisers, which is what every
    // CUDA program does; nothing else is loaded here.
    unsafe { Library::new(soname) }.map_err(|e| refused(soname, &e.to_string()))
}

/// `dlopen`'s message as a `LoadError`: not found only when the loader says no such file.
fn refused(library: &str, message: &str) -> LoadError {
    if message.contains("No such file or directory") {
        LoadError::NotFound {
            library: library.to_string(),
        }
    } else {
        LoadError::Refused {
            library: library.to_string(),
            reason: message.to_string(),
        }
    }
}

/// Copy a function pointer of type `T` out of `lib`.
///
/// # Safety
/// `T` must be the C signature of `symbol`.
pub unsafe fn sym<T: Copy>(
    lib: &Library,
    library: &'static str,
    symbol: &'static str,
) -> Result<T, LoadError> {
    lib.get::<T>(symbol.as_bytes())
        .map(|s| *s)
        .map_err(|_| LoadError::Symbol {
            library: library.to_string(),
            symbol: symbol.to_string(),
        })
}

/// Like `sym`, for functions that older drivers may lack.
///
/// # Safety
/// `T` must be the C signature of `symbol`.
pub unsafe fn optional<T: Copy>(lib: &Library, symbol: &'static str) -> Option<T> {
    lib.get::<T>(symbol.as_bytes()).ok().map(|s| *s)
}

/// A NUL-terminated C buffer as a Rust string (lossy, up to the first NUL).
pub fn c_buf_to_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_file_is_not_found() {
        assert_eq!(
            open("libgpuimg-absent.so.1").err(),
            Some(LoadError::NotFound {
                library: "libgpuimg-absent.so.1".into()
            })
        );
        let e = refused("libcuda.so.1", "libcuda.so.1: wrong ELF class: ELFCLASS32");
        assert_eq!(
            e.to_string(),
            "`libcuda.so.1` does not load: libcuda.so.1: wrong ELF class: ELFCLASS32"
        );
    }
}
