//! The reader and the pruner on hand-made ELF files: selection by target, the layout kept,
//! and every malformation refused.

use std::io::Write;

use super::*;

fn cc(s: &str) -> Cc {
    s.parse().unwrap()
}

fn t(code: Code, major: u32, minor: u32, variant: Variant) -> Target {
    Target {
        code,
        major,
        minor,
        variant,
    }
}

#[test]
fn selection_follows_the_drivers_rule() {
    use Code::*;
    use Variant::*;
    let h200 = cc("9.0");
    assert!(t(Cubin, 9, 0, Plain).selectable_by(h200));
    assert!(t(Cubin, 9, 0, ArchSpecific).selectable_by(h200));
    assert!(!t(Cubin, 8, 0, Plain).selectable_by(h200), "another major");
    assert!(t(Cubin, 8, 0, Plain).selectable_by(cc("8.6")));
    assert!(!t(Cubin, 8, 6, Plain).selectable_by(cc("8.0")));
    assert!(!t(Cubin, 10, 0, ArchSpecific).selectable_by(cc("10.3")));
    assert!(t(Cubin, 10, 0, Family).selectable_by(cc("10.3")));
    assert!(!t(Cubin, 10, 3, Family).selectable_by(cc("10.0")));
    assert!(t(Ptx, 8, 0, Plain).selectable_by(h200));
    assert!(!t(Ptx, 12, 0, Plain).selectable_by(h200));
    assert!(!t(Ptx, 9, 0, ArchSpecific).selectable_by(cc("10.0")));
    assert_eq!(t(Cubin, 10, 0, Family).to_string(), "sm_100f");
    assert_eq!(t(Ptx, 9, 0, ArchSpecific).to_string(), "compute_90a");
    assert_eq!(cc("sm_90"), cc("9.0"));
    assert!("9".parse::<Cc>().is_err() && "sm_9x".parse::<Cc>().is_err());
}

/// One entry: kind, arch (`90`), flags, payload.
fn entry(kind: u16, arch: u32, flags: u64, payload: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    e[0..2].copy_from_slice(&kind.to_le_bytes());
    e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
    e[4..8].copy_from_slice(&64u32.to_le_bytes());
    e[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    e[28..32].copy_from_slice(&arch.to_le_bytes());
    e[40..48].copy_from_slice(&flags.to_le_bytes());
    e.extend_from_slice(payload);
    e
}

fn container(entries: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = entries.concat();
    let mut c = Vec::new();
    c.extend_from_slice(&CONTAINER_MAGIC.to_le_bytes());
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&16u16.to_le_bytes());
    c.extend_from_slice(&(body.len() as u64).to_le_bytes());
    c.extend_from_slice(&body);
    c
}

/// An ELF64 file: some bytes, then `.nv_fatbin` holding `section`, then the section names
/// and headers. Returns the file and the section's offset.
fn elf(section: &[u8]) -> (tempfile::NamedTempFile, u64) {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b.extend_from_slice(b"host code before");
    while !b.len().is_multiple_of(8) {
        b.push(0);
    }
    let fat_off = b.len() as u64;
    b.extend_from_slice(section);
    b.extend_from_slice(b"after");
    let names = b"\0.nv_fatbin\0.shstrtab\0";
    let names_off = b.len() as u64;
    b.extend_from_slice(names);
    while !b.len().is_multiple_of(8) {
        b.push(0);
    }
    let shoff = b.len() as u64;
    let sh = |name: u32, ty: u32, off: u64, size: u64| {
        let mut s = vec![0u8; 64];
        s[0..4].copy_from_slice(&name.to_le_bytes());
        s[4..8].copy_from_slice(&ty.to_le_bytes());
        s[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        s[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        s
    };
    b.extend(sh(0, 0, 0, 0));
    b.extend(sh(1, 1, fat_off, section.len() as u64));
    b.extend(sh(12, 3, names_off, names.len() as u64));
    b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    b[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(&b).unwrap();
    (f, fat_off)
}

#[test]
fn pruning_moves_kept_entries_to_the_front_and_zeroes_the_rest() {
    let sm80 = entry(2, 80, 0x11, b"SM80SM80");
    let sm90 = entry(2, 90, 0x11, b"SM90SM90SM90SM90");
    let sm90a = entry(2, 90, 0x11 | 0x10_0000, b"AAAAAAAA");
    let ptx120 = entry(1, 120, 0x11, b"PTX!PTX!");
    let first = container(&[sm80.clone(), sm90.clone(), ptx120.clone(), sm90a.clone()]);
    let second = container(std::slice::from_ref(&sm80));
    let mut section = first.clone();
    section.extend_from_slice(&[0u8; 8]);
    section.extend_from_slice(&second);
    let (f, off) = elf(&section);
    let file = std::fs::File::open(f.path()).unwrap();
    let listing = read(&file).unwrap();
    assert_eq!(listing.containers.len(), 2);
    assert_eq!(listing.containers[1].offset, off + first.len() as u64 + 8);
    let p = prune(&listing, &[cc("9.0")]);
    assert_eq!((p.entries, p.kept), (5, 2));
    assert_eq!(p.zeroed, (sm80.len() * 2 + ptx120.len()) as u64);
    let mut out = tempfile::tempfile().unwrap();
    let hash = p.write(&file, &mut out).unwrap();
    let before = std::fs::read(f.path()).unwrap();
    let mut after = Vec::new();
    use std::io::{Read, Seek};
    out.rewind().unwrap();
    out.read_to_end(&mut after).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(
        hash.to_vec(),
        <sha2::Sha256 as sha2::Digest>::digest(&after).to_vec()
    );
    let o = off as usize;
    assert_eq!(after[..o], before[..o], "bytes before the section");
    let end = o + section.len();
    assert_eq!(after[end..], before[end..], "bytes after the section");
    // The first container: its header with the new size, sm_90 and sm_90a, zeros.
    let kept = [sm90.clone(), sm90a.clone()].concat();
    assert_eq!(after[o..o + 8], first[..8]);
    assert_eq!(
        u64::from_le_bytes(after[o + 8..o + 16].try_into().unwrap()),
        kept.len() as u64
    );
    assert_eq!(after[o + 16..o + 16 + kept.len()], kept[..]);
    assert!(after[o + 16 + kept.len()..o + first.len()]
        .iter()
        .all(|&b| b == 0));
    // The second kept its start; nothing in it was selectable, so it is empty.
    let s = o + first.len() + 8;
    assert_eq!(after[s..s + 8], second[..8]);
    assert_eq!(
        u64::from_le_bytes(after[s + 8..s + 16].try_into().unwrap()),
        0
    );
    // Read back: what was kept, where it was.
    let back = read(&out).unwrap();
    let targets: Vec<String> = back.entries().map(|e| e.target.to_string()).collect();
    assert_eq!(targets, ["sm_90", "sm_90a"]);
    assert_eq!(back.containers[1].offset, listing.containers[1].offset);
    // Pruning for what everything holds changes nothing.
    assert!(!prune(&listing, &[cc("8.0"), cc("9.0"), cc("12.0")]).changes());
}

#[test]
fn what_the_reader_does_not_know_makes_the_file_not_understood() {
    let ok = entry(2, 90, 0x11, b"12345678");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("entry kind", container(&[entry(0x40, 90, 0x11, b"x")])),
        ("variant", container(&[entry(2, 90, 0x40_0000, b"x")])),
        ("variant", container(&[entry(2, 90, 0x30_0000, b"x")])),
        ("arch", container(&[entry(2, 3, 0x11, b"x")])),
        ("bad magic", {
            let mut c = container(std::slice::from_ref(&ok));
            c[0] = 1;
            c
        }),
        ("container version", {
            let mut c = container(std::slice::from_ref(&ok));
            c[4] = 2;
            c
        }),
        ("past its section", {
            let mut c = container(std::slice::from_ref(&ok));
            c[8] += 1;
            c
        }),
        ("past its container", {
            let mut c = container(std::slice::from_ref(&ok));
            c[16 + 8] += 1;
            c
        }),
        ("entry header size", {
            let mut c = container(std::slice::from_ref(&ok));
            c[16 + 4] = 8;
            c
        }),
        ("after the last container", {
            let mut c = container(std::slice::from_ref(&ok));
            c.extend_from_slice(&[0, 0, 7]);
            c
        }),
    ];
    for (what, section) in cases {
        let (f, _) = elf(&section);
        let e = read(&std::fs::File::open(f.path()).unwrap()).unwrap_err();
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    let mut not_elf = tempfile::NamedTempFile::new().unwrap();
    not_elf.write_all(&[0u8; 100]).unwrap();
    assert_eq!(
        read(&std::fs::File::open(not_elf.path()).unwrap()),
        Err(NotUnderstood::NotElf)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Bytes changed anywhere in a fatbin ELF (headers, containers, entries): reading is an
    /// error or a listing; pruning what was read never panics, keeps the file's size and every
    /// byte outside the containers it listed, and reads back.
    #[test]
    fn changed_files_are_refused_or_pruned_in_place(
        changes in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..6),
        gpu in proptest::sample::select(vec!["8.0", "9.0", "10.0", "12.0"]),
    ) {
        let first = container(&[
            entry(2, 80, 0x11, b"SM80SM80"),
            entry(2, 90, 0x11, b"SM90SM90SM90SM90"),
            entry(1, 120, 0x11, b"PTX!PTX!"),
            entry(2, 100, 0x11 | 0x10_0000, b"AAAAAAAA"),
        ]);
        let mut section = first.clone();
        section.extend_from_slice(&[0u8; 8]);
        section.extend_from_slice(&container(&[entry(2, 90, 0x11, b"x")]));
        let (f, _) = elf(&section);
        let mut bytes = std::fs::read(f.path()).unwrap();
        let len = bytes.len();
        for (at, b) in changes {
            bytes[at % len] ^= b | 1;
        }
        std::fs::write(f.path(), &bytes).unwrap();
        let file = std::fs::File::open(f.path()).unwrap();
        if let Ok(listing) = read(&file) {
            let p = prune(&listing, &[cc(gpu)]);
            let mut out = tempfile::tempfile().unwrap();
            p.write(&file, &mut out).unwrap();
            use std::io::{Read, Seek};
            out.rewind().unwrap();
            let mut after = Vec::new();
            out.read_to_end(&mut after).unwrap();
            proptest::prop_assert_eq!(after.len(), bytes.len());
            let mut inside = vec![false; len];
            for c in &listing.containers {
                inside[c.offset as usize..(c.offset + c.size) as usize].fill(true);
            }
            for (i, (a, b)) in after.iter().zip(&bytes).enumerate() {
                if !inside[i] {
                    proptest::prop_assert_eq!(a, b, "byte {} outside", i);
                }
            }
            proptest::prop_assert!(read(&out).is_ok());
        }
    }
}
