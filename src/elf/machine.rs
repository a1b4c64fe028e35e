//! ELF machine numbers (`e_machine`): read from a file's first 20 bytes, named for messages,
//! and matched to the machines of OCI platforms (`amd64`) and CPython (`x86_64`).
//! Must never read past the bytes it is given.

/// The machines gpuimg names: (ELF number, its name, the OCI/Debian architecture).
const MACHINES: &[(u16, &str, &str)] = &[
    (62, "x86_64", "amd64"),
    (183, "aarch64", "arm64"),
    (21, "ppc64", "ppc64le"),
    (22, "s390", "s390x"),
    (243, "riscv", "riscv64"),
    (3, "i386", "386"),
    (40, "arm", "arm"),
];

/// The `e_machine` of an ELF file from its first bytes; `None` when they are not an ELF header.
pub fn of_header(head: &[u8]) -> Option<u16> {
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return None;
    }
    let b = [head[18], head[19]];
    match head[5] {
        1 => Some(u16::from_le_bytes(b)),
        2 => Some(u16::from_be_bytes(b)),
        _ => None,
    }
}

/// The machine of an OCI platform architecture (`amd64` → 62); `None` for one gpuimg does not
/// know.
pub fn of_architecture(arch: &str) -> Option<u16> {
    MACHINES
        .iter()
        .find(|(_, _, a)| *a == arch)
        .map(|(m, _, _)| *m)
}

/// The machine of a CPython `platform.machine()` name (`x86_64` → 62), `0` when unknown.
pub fn of_name(name: &str) -> u16 {
    MACHINES
        .iter()
        .find(|(_, n, _)| *n == name)
        .map_or(0, |(m, _, _)| *m)
}

/// A machine's name for messages (`x86_64`, or `machine 999`).
pub fn name(machine: u16) -> String {
    MACHINES
        .iter()
        .find(|(m, _, _)| *m == machine)
        .map_or_else(|| format!("machine {machine}"), |(_, n, _)| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_platforms_and_names_agree() {
        let mut h = b"\x7fELF\x02\x01\x01".to_vec();
        h.resize(20, 0);
        h[18] = 183;
        assert_eq!(of_header(&h), Some(183));
        assert_eq!(of_header(&h[..19]), None);
        assert_eq!(of_header(b"#!/bin/sh\n0123456789"), None);
        assert_eq!(of_architecture("arm64"), Some(183));
        assert_eq!(of_architecture("amd64"), Some(62));
        assert_eq!(of_architecture("mips"), None);
        assert_eq!(of_name("aarch64"), 183);
        assert_eq!(name(62), "x86_64");
        assert_eq!(name(999), "machine 999");
    }
}
