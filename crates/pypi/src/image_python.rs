//! The image's Python, as the index client, resolver and installer see it: the interpreter, its
//! version for markers and `.pyc`, its install scheme, the glibc that bounds `manylinux_2_N`
//! wheels and the machine.
//!
//! Plain data. The root package reads it from the base's packages (`sources::image_interpreter`);
//! must never be read from the build host.

/// The image's Python, as read from the base's packages (Debian's `python3.X`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePython {
    /// `(3, 11)`.
    pub version: (u32, u32),
    /// The full version from the package (`3.11.2`), for `python_full_version` markers.
    pub full_version: String,
    /// The interpreter's absolute path in the image (`/usr/bin/python3.11`), for `#!` lines.
    pub interpreter: String,
    /// Where purelib and platlib go (`/usr/local/lib/python3.11/dist-packages` on Debian).
    pub site_dir: String,
    /// Where scripts go (`/usr/local/bin`).
    pub scripts_dir: String,
    /// The base's glibc version (`(2, 36)`), which bounds `manylinux_2_N` tags.
    pub glibc: (u32, u32),
    /// `x86_64` or `aarch64`, from the image's architecture.
    pub machine: String,
}
