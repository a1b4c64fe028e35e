//! The host's platform as `uname` reports it (`Linux`, `aarch64`), and its name in OCI terms
//! (`linux`, `arm64`), which the expectation's `platform` uses.
//!
//! Reading is one `uname(2)` call; naming is a pure function, so tests feed it recorded
//! values. Must never guess: a machine name it does not know is compared as it is.

/// The host's `uname -s` and `uname -m` (`Linux`, `x86_64`), or `None` if `uname` failed.
pub fn uname() -> Option<(String, String)> {
    let mut buf = std::mem::MaybeUninit::<libc::utsname>::zeroed();
    // SAFETY: `uname` fills the struct it is given and returns 0, or returns -1 and leaves it
    // as it was (zeroed, which is a valid `utsname`: arrays of `c_char`).
    let rc = unsafe { libc::uname(buf.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: initialised above (zeroed, then filled).
    let u = unsafe { buf.assume_init() };
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some((text(&u.sysname), text(&u.machine)))
}

/// The OCI architecture of a `uname -m` machine name (`x86_64` → `amd64`, `aarch64` →
/// `arm64`); a name it does not know is returned as it is.
pub fn oci_architecture(machine: &str) -> &str {
    match machine {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "arm64" | "aarch64_be" => "arm64",
        "i386" | "i486" | "i586" | "i686" => "386",
        "armv5l" | "armv6l" | "armv7l" | "armv8l" => "arm",
        "ppc64le" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The OCI OS of a `uname -s` system name (`Linux` → `linux`).
pub fn oci_os(sysname: &str) -> String {
    sysname.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uname_names_map_to_oci_names() {
        assert_eq!(oci_architecture("x86_64"), "amd64");
        assert_eq!(oci_architecture("aarch64"), "arm64");
        assert_eq!(oci_architecture("armv7l"), "arm");
        assert_eq!(oci_architecture("sparc64"), "sparc64");
        assert_eq!(oci_os("Linux"), "linux");
    }

    #[test]
    fn this_host_has_a_platform() {
        let (os, machine) = uname().unwrap();
        assert_eq!(oci_os(&os), "linux");
        // The test binary runs on a machine of its own architecture (or under an emulator
        // that reports one).
        assert_eq!(
            oci_architecture(&machine),
            oci_architecture(std::env::consts::ARCH)
        );
    }
}
