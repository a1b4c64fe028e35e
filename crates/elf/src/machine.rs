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

/// ELF's own names of machines (as `readelf` and `file` write them), for listings and the
/// image's machine check: the platforms' machines and the processors whose code images carry
/// as data (GPU code, BPF).
const ELF_NAMES: &[(u16, &str)] = &[
    (62, "x86-64"),
    (183, "aarch64"),
    (21, "ppc64"),
    (22, "s390"),
    (243, "riscv"),
    (3, "i386"),
    (40, "arm"),
    (8, "mips"),
    (20, "ppc"),
    (2, "sparc"),
    (43, "sparcv9"),
    (258, "loongarch"),
    (190, "cuda"),
    (224, "amdgpu"),
    (247, "bpf"),
];

/// A machine's ELF name (`x86-64`, `riscv`, `cuda`, or `machine 999`).
pub fn elf_name(machine: u16) -> String {
    ELF_NAMES
        .iter()
        .find(|(m, _)| *m == machine)
        .map_or_else(|| format!("machine {machine}"), |(_, n)| n.to_string())
}

/// The Debian multiarch triplet of a platform's machine (`aarch64-linux-gnu`): the loader's
/// own directories under `/lib` and `/usr/lib`.
pub fn triplet(machine: u16) -> Option<&'static str> {
    Some(match machine {
        62 => "x86_64-linux-gnu",
        183 => "aarch64-linux-gnu",
        21 => "powerpc64le-linux-gnu",
        22 => "s390x-linux-gnu",
        243 => "riscv64-linux-gnu",
        3 => "i386-linux-gnu",
        40 => "arm-linux-gnueabihf",
        _ => return None,
    })
}

/// What the first bytes of an ELF file say: its machine and its type (`e_type`: 1
/// relocatable, 2 executable, 3 shared object, 4 core).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Head {
    pub machine: u16,
    pub kind: u16,
}

/// Bytes of a file [`head`] reads.
pub const HEAD_BYTES: usize = 20;

/// The [`Head`] of an ELF file from its first [`HEAD_BYTES`] bytes; `None` when they are not
/// an ELF header.
pub fn head(bytes: &[u8]) -> Option<Head> {
    let machine = of_header(bytes)?;
    let b = [bytes[16], bytes[17]];
    let kind = if bytes[5] == 1 {
        u16::from_le_bytes(b)
    } else {
        u16::from_be_bytes(b)
    };
    Some(Head { machine, kind })
}

/// Whether code for `machine` runs on a `platform` machine: its own, and 32-bit x86 on x86-64
/// (the kernel's IA-32 emulation; Debian's `i386` multiarch packages rely on it).
pub fn runs_on(machine: u16, platform: u16) -> bool {
    machine == platform || (machine, platform) == (3, 62)
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
        assert_eq!(elf_name(62), "x86-64");
        assert_eq!(elf_name(243), "riscv");
        assert_eq!(elf_name(999), "machine 999");
        h[16] = 3;
        assert_eq!(
            head(&h),
            Some(Head {
                machine: 183,
                kind: 3
            })
        );
        let mut be = h.clone();
        be[5] = 2;
        be[16..20].copy_from_slice(&[0, 2, 0, 22]);
        assert_eq!(
            head(&be),
            Some(Head {
                machine: 22,
                kind: 2
            })
        );
        assert_eq!(head(&h[..10]), None);
        assert_eq!(triplet(183), Some("aarch64-linux-gnu"));
        assert!(runs_on(3, 62) && runs_on(183, 183));
        assert!(!runs_on(62, 183) && !runs_on(40, 183) && !runs_on(62, 3));
        assert_eq!(triplet(190), None);
    }
}
