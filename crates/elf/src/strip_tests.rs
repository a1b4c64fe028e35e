//! Tests of `elf::strip` on shared objects gcc builds with DWARF and a symbol table: what
//! binutils and the loader see of the stripped copy, and files left alone.

use std::path::Path;
use std::process::Command;

use super::*;

/// A shared object built with DWARF and a full symbol table (gcc and binutils are in
/// `scripts/install-deps.sh`).
fn build_library(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("lib.c");
    std::fs::write(
        &src,
        "static int hidden(int x) { return x * 3; }\n\
         int visible(int x) { return hidden(x) + 1; }\n\
         const char *name(void) { return \"stripped-ok\"; }\n",
    )
    .unwrap();
    let out = dir.join("libt.so");
    let st = Command::new("gcc")
        .args(["-g", "-O1", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc must be installed (scripts/install-deps.sh)");
    assert!(st.success());
    out
}

fn readelf(args: &[&str], f: &Path) -> String {
    let o = Command::new("readelf")
        .args(args)
        .arg(f)
        .output()
        .expect("readelf must be installed (binutils)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The library `build_library` made loads through ctypes and its functions answer.
fn loads_and_runs(lib: &Path) {
    let py = format!(
        "import ctypes; l = ctypes.CDLL({:?}); l.name.restype = ctypes.c_char_p; \
         print(l.visible(4), l.name().decode())",
        lib.display().to_string()
    );
    let o = Command::new("python3").arg("-c").arg(&py).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "13 stripped-ok");
}

fn strip_to(src: &Path, dst: &Path) -> Stripping {
    let mut f = File::open(src).unwrap();
    let s = plan(&mut f).unwrap().expect("something to strip");
    let mut out = File::create(dst).unwrap();
    let hash = s.write(&f, &mut out).unwrap();
    drop(out);
    let bytes = std::fs::read(dst).unwrap();
    assert_eq!(bytes.len() as u64, s.new_size);
    assert_eq!(<[u8; 32]>::from(Sha256::digest(&bytes)), hash);
    s
}

#[test]
fn debug_sections_and_the_symbol_table_go_and_the_loader_sees_the_same_library() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_library(dir.path());
    let before = readelf(&["-SW"], &lib);
    assert!(
        before.contains(".debug_info") && before.contains(".symtab"),
        "{before}"
    );
    let out = dir.path().join("libt-stripped.so");
    let s = strip_to(&lib, &out);
    assert!(
        s.removed.iter().any(|n| n == ".debug_info"),
        "{:?}",
        s.removed
    );
    assert!(s.removed.iter().any(|n| n == ".symtab"));
    assert!(s.removed.iter().any(|n| n == ".strtab"));
    assert!(s.new_size < s.file_size);

    // binutils reads the result as a valid ELF without the sections.
    let after = readelf(&["-SW"], &out);
    for gone in [".debug_", ".symtab", ".strtab"] {
        assert!(!after.contains(gone), "{gone} left:\n{after}");
    }
    for kept in [".dynsym", ".dynstr", ".text", ".dynamic", ".shstrtab"] {
        assert!(after.contains(kept), "{kept} gone:\n{after}");
    }
    // What the loader reads is unchanged: program headers, dynamic section, dynamic symbols.
    for args in [&["-lW"][..], &["-dW"][..], &["--dyn-syms", "-W"][..]] {
        assert_eq!(readelf(args, &lib), readelf(args, &out), "readelf {args:?}");
    }
    // Byte for byte up to the end of the loaded part (the ELF header aside).
    let a = std::fs::read(&lib).unwrap();
    let b = std::fs::read(&out).unwrap();
    let loaded = s.unchanged_prefix() as usize;
    assert_eq!(a[64..loaded], b[64..loaded]);
    assert_eq!(a[..40], b[..40], "ELF header outside the section fields");

    // It loads and runs.
    loads_and_runs(&out);

    // Nothing left to strip.
    assert!(plan(&mut File::open(&out).unwrap()).unwrap().is_none());
}

#[test]
fn a_loaded_segment_behind_the_symbol_table_moves_down_and_still_loads() {
    // `patchelf` grows `.dynstr` into a new loaded segment at the file's end, behind
    // `.symtab`, as torch's wheels have it.
    let dir = tempfile::tempdir().unwrap();
    let lib = build_library(dir.path());
    let soname = "libgrown-by-patchelf-with-a-name-longer-than-any-before.so.1";
    let st = Command::new("patchelf")
        .arg("--set-soname")
        .arg(soname)
        .arg(&lib)
        .status()
        .expect("patchelf must be installed (scripts/install-deps.sh)");
    assert!(st.success());
    let loads = |f: &Path| -> Vec<(u64, u64)> {
        readelf(&["-lW"], f)
            .lines()
            .filter(|l| l.trim_start().starts_with("LOAD"))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                (hex(w[1]), hex(w[2]))
            })
            .collect()
    };
    let before = loads(&lib);
    let symtab_at = readelf(&["-SW"], &lib)
        .lines()
        .find(|l| l.contains(".symtab"))
        .map(|l| {
            let w: Vec<&str> = l.split(']').nth(1).unwrap().split_whitespace().collect();
            u64::from_str_radix(w[3], 16).unwrap()
        })
        .unwrap();
    let last = *before.last().unwrap();
    assert!(
        last.0 > symtab_at,
        "patchelf put no segment behind .symtab: {before:?}"
    );

    let out = dir.path().join("libgrown-stripped.so");
    let s = strip_to(&lib, &out);
    assert!(s.removed.iter().any(|n| n == ".symtab"));
    let after = loads(&out);
    assert_eq!(before.len(), after.len());
    for ((o1, v1), (o2, v2)) in before.iter().zip(&after) {
        assert_eq!(v1, v2, "a segment's address changed");
        assert!(o2 <= o1 && (o1 - o2) % 4096 == 0, "{o1:#x} -> {o2:#x}");
    }
    assert!(
        after.last().unwrap().0 < last.0,
        "the last segment did not move down"
    );
    // The same entries (the dynamic section's file offset moved with its segment).
    let entries = |args: &[&str], f: &Path| -> String {
        readelf(args, f)
            .lines()
            .filter(|l| !l.contains("at offset"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for args in [&["-dW"][..], &["--dyn-syms", "-W"][..]] {
        assert_eq!(entries(args, &lib), entries(args, &out), "readelf {args:?}");
    }
    // Every segment's bytes are where its new offset says.
    let (a, b) = (std::fs::read(&lib).unwrap(), std::fs::read(&out).unwrap());
    let sizes: Vec<u64> = readelf(&["-lW"], &lib)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            u64::from_str_radix(w[4].trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    // (The ELF header and the program headers, at the start, hold the new offsets.)
    let headers_end = 64 + 56 * usize::from(u16::from_le_bytes([a[56], a[57]]));
    for (((o1, _), (o2, _)), n) in before.iter().zip(&after).zip(&sizes) {
        let (o1, o2, n) = (*o1 as usize, *o2 as usize, *n as usize);
        let skip = headers_end.saturating_sub(o1).min(n);
        assert_eq!(
            a[o1 + skip..o1 + n],
            b[o2 + skip..o2 + n],
            "segment at {o1:#x}"
        );
    }
    loads_and_runs(&out);
    assert!(readelf(&["-dW"], &out).contains(soname));
    assert!(plan(&mut File::open(&out).unwrap()).unwrap().is_none());
}

#[test]
fn files_it_does_not_understand_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_library(dir.path());
    let good = std::fs::read(&lib).unwrap();
    let try_bytes = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        plan(&mut File::open(&p).unwrap()).unwrap().is_none()
    };
    assert!(try_bytes("empty", b""));
    assert!(try_bytes(
        "text",
        b"not an ELF at all, but long enough to have a header of 64 bytes...."
    ));
    // ELF32: not read.
    let mut elf32 = good.clone();
    elf32[4] = 1;
    assert!(try_bytes("elf32", &elf32));
    // Section headers past the end of the file.
    let mut far = good.clone();
    far[40..48].copy_from_slice(&(good.len() as u64).to_le_bytes());
    assert!(try_bytes("far", &far));
    // Truncated inside the section header table.
    assert!(try_bytes("cut", &good[..good.len() - 10]));
    // Bytes past the loaded part that no section holds (something appended).
    let mut appended = good.clone();
    appended.extend(std::iter::repeat_n(0xAAu8, 64 * 1024));
    assert!(try_bytes("appended", &appended));
    // Every truncation and every single-byte change of the header and the section headers
    // either plans or says no, without a panic.
    let shoff = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
    for at in (0..64).chain(shoff..good.len()) {
        let mut b = good.clone();
        b[at] ^= 0xff;
        let p = dir.path().join("flip");
        std::fs::write(&p, &b).unwrap();
        let _ = plan(&mut File::open(&p).unwrap());
    }
}

#[test]
fn a_library_without_debug_sections_or_symbol_table_has_nothing_to_strip() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_library(dir.path());
    let st = Command::new("strip")
        .arg("--strip-unneeded")
        .arg(&lib)
        .status()
        .expect("strip (binutils)");
    assert!(st.success());
    assert!(plan(&mut File::open(&lib).unwrap()).unwrap().is_none());
}
