//! Truncated, corrupted and made-up `.ko` files: the reader answers an error or a module, never a
//! panic; a module cut anywhere inside its ELF part is refused; the check of whatever reads
//! passes or refuses without a panic.

use gpuimg_kmod::{check, Kernel, Module};

use crate::kernel::fixture;

/// A fixed-seed xorshift: the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const MAGIC: &[u8] = b"~Module signature appended~\n";

/// Where the signed module's ELF part ends.
fn elf_len(b: &[u8]) -> usize {
    assert!(b.ends_with(MAGIC));
    let info = b.len() - MAGIC.len() - 12;
    let sig = u32::from_be_bytes(b[info + 8..info + 12].try_into().unwrap()) as usize;
    info - sig
}

#[test]
fn a_module_cut_anywhere_fails_cleanly() {
    let f = fixture();
    let (i, _) = f
        .files
        .iter()
        .enumerate()
        .min_by_key(|(_, (_, b))| b.len())
        .unwrap();
    let (file, b) = &f.files[i];
    let elf = elf_len(b);
    // Every cut in the first and last 4 KiB, and a spread over the rest.
    let mut cuts: Vec<usize> = (0..4096.min(b.len())).collect();
    cuts.extend(b.len().saturating_sub(4096)..b.len());
    cuts.extend((0..b.len()).step_by((b.len() / 2048).max(1)));
    cuts.push(elf);
    for cut in cuts {
        let r = Module::read(file, &b[..cut]);
        if cut < elf {
            let e = r
                .err()
                .unwrap_or_else(|| panic!("cut at {cut} of {elf} was read"));
            assert!(
                e.to_string()
                    .starts_with(&format!("kernel module {file}: ")),
                "{e}"
            );
        } else if cut == elf {
            // Without its signature, the module itself.
            let m = r.unwrap();
            assert!(m.signature.is_none());
            assert_eq!(m.undefined, f.modules[i].undefined);
        }
    }
}

#[test]
fn corrupted_and_made_up_modules_never_panic() {
    let f = fixture();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let smallest: Vec<usize> = {
        let mut v: Vec<usize> = (0..f.files.len()).collect();
        v.sort_by_key(|i| f.files[*i].1.len());
        v.truncate(8);
        v
    };
    // The kernel's exports these modules use (the whole table costs a debug build milliseconds
    // per check, the loop's time).
    let mut symvers = f.symvers.clone();
    symvers.retain(|e| {
        smallest.iter().any(|i| {
            let m = &f.modules[*i];
            m.undefined.iter().any(|u| u.symbol == e.symbol)
                || m.versions
                    .as_ref()
                    .is_some_and(|v| v.contains_key(&e.symbol))
        })
    });
    let kernel = Kernel {
        symvers: &symvers,
        ..f.kernel()
    };
    let mut read = 0;
    for round in 0..1500 {
        let (file, orig) = &f.files[smallest[round % smallest.len()]];
        let mut b = orig.clone();
        let elf = elf_len(&b);
        // Flip bytes where the structure lies: the ELF header, the section header table at
        // the ELF part's end, the signature trailer, or anywhere.
        for _ in 0..1 + rng.below(8) {
            let at = match rng.below(4) {
                0 => rng.below(64),
                1 => elf.saturating_sub(1 + rng.below(64 * 48)),
                2 => b.len() - 1 - rng.below(64),
                _ => rng.below(b.len()),
            };
            b[at] = match rng.below(3) {
                0 => 0,
                1 => 0xff,
                _ => rng.next() as u8,
            };
        }
        if let Ok(m) = Module::read(file, &b) {
            read += 1;
            let _ = check(&[m], &kernel);
        }
    }
    assert!(
        read > 0,
        "every corruption was refused: the loop only saw errors"
    );
    // Made-up bytes: an ELF magic, a signature trailer or neither, with random bytes between.
    for round in 0..500 {
        let mut b: Vec<u8> = (0..rng.below(4096)).map(|_| rng.next() as u8).collect();
        if round % 2 == 0 {
            b.splice(0..0, *b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0\x3e\0");
        }
        if round % 3 == 0 {
            b.extend_from_slice(&[0, 0, 2, 0, 0, 0, 0, 0]);
            b.extend_from_slice(&(rng.below(1 << 20) as u32).to_be_bytes());
            b.extend_from_slice(MAGIC);
        }
        assert!(Module::read("made-up.ko", &b).is_err());
    }
}
