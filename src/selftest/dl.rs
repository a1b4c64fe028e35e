//! Run-time loading of the driver's libraries (`dlopen`), so no CUDA toolkit is needed to build.
//!
//! A missing library or symbol is an error value, never a panic. Loaded libraries are kept for
//! the life of the process (the fn pointers taken from them must stay valid).

use libloading::Library;

/// Why a driver library could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("`{0}` not found")]
    Library(&'static str),
    #[error("`{library}` lacks `{symbol}`")]
    Symbol {
        library: &'static str,
        symbol: &'static str,
    },
}

/// Open a shared library by soname.
pub fn open(soname: &'static str) -> Result<Library, LoadError> {
    // SAFETY: loading the NVIDIA driver libraries runs their initialisers, which is what every
    // CUDA program does; nothing else is loaded here.
    unsafe { Library::new(soname) }.map_err(|_| LoadError::Library(soname))
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
        .map_err(|_| LoadError::Symbol { library, symbol })
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
