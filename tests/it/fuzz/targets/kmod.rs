//! Target `kmod`: the kernel-module reader and the truth check (`gpuimg_kmod`), which read the
//! `.ko` files a host image's module build leaves, and a kernel's `Module.symvers`.
//!
//! Seeds are a relocatable object with the tables `modpost` gives a module, unsigned and with a
//! PKCS#7 signature appended as `sign-file` appends it (`scripts/fuzz-corpus.sh`); mutations
//! overwrite header, table and trailer fields with edge numbers. Properties: a module read has a
//! non-empty name and names no empty symbol, and reads the same twice; its check against a small
//! kernel that exports what the seed needs either passes with the module's own vermagic in its
//! facts or refuses naming the module; the same bytes read as a `Module.symvers` never panic.

use arbitrary::{Result, Unstructured};
use gpuimg_kmod::{check, CheckError, Kernel, Module, Symvers};

use crate::fuzz::harness::{files, Target, Verdict};
use crate::fuzz::mutate::{self, ByteOp, INTERESTING};

pub static TARGET: Target = Target {
    name: "kmod",
    seeds,
    mutate: mutate_input,
    check: check_input,
    iterations: 40_000,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "kmod")
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut data = mutate::pick_seed(u, seeds)?.to_vec();
    for _ in 0..u.int_in_range(1..=6)? {
        if u.ratio(3, 4)? && data.len() >= 8 {
            let width = [1usize, 2, 4, 8][u.choose_index(4)?];
            let at = u.choose_index(data.len() / width)? * width;
            let v = INTERESTING[u.choose_index(INTERESTING.len())?];
            let end = (at + width).min(data.len());
            let n = end - at;
            data[at..end].copy_from_slice(&v.to_le_bytes()[..n]);
        } else {
            let op: ByteOp = u.arbitrary()?;
            op.apply(
                &mut data,
                &[
                    b"\x7fELF",
                    b"\0",
                    b"~Module signature appended~\n",
                    b"__ksymtab_",
                ],
                seeds,
            );
        }
    }
    Ok(data)
}

/// The kernel the seed was made for: it exports what the seed needs, with the seed's CRCs.
fn kernel_symvers() -> &'static Symvers {
    static S: std::sync::OnceLock<Symvers> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        Symvers::parse(
            b"0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n\
              0x9abcdef0\tkfree\tvmlinux\tEXPORT_SYMBOL\t\n",
        )
        .expect("the fixed Module.symvers")
    })
}

fn check_input(b: &[u8]) -> Verdict {
    let _ = Symvers::parse(b);
    let m = match Module::read("fuzz.ko", b) {
        Ok(m) => m,
        Err(e) if e.to_string().starts_with("kernel module fuzz.ko: ") => return Ok("refused"),
        Err(e) => return Err(format!("an error that does not name the file: {e}")),
    };
    if m.name.is_empty() {
        return Err("a module without a name".into());
    }
    if m.undefined.iter().any(|u| u.symbol.is_empty())
        || m.exports.iter().any(|x| x.symbol.is_empty())
    {
        return Err(format!("an empty symbol: {m:?}"));
    }
    let again = Module::read("fuzz.ko", b).map_err(|e| format!("read once, then not: {e}"))?;
    if format!("{again:?}") != format!("{m:?}") {
        return Err("two reads of the same bytes differ".into());
    }
    let kernel = Kernel {
        release: "6.1.0-1-cloud-amd64",
        vermagic: None,
        symvers: kernel_symvers(),
    };
    match check(std::slice::from_ref(&m), &kernel) {
        Ok(facts) => {
            if facts.len() != 1 || Some(facts[0].vermagic.as_str()) != m.vermagic() {
                return Err(format!("facts {facts:?} for {m:?}"));
            }
            Ok("read, passed")
        }
        Err(CheckError::Refused { refusals, .. }) => {
            let named = refusals.iter().all(|r| r.to_string().starts_with(&m.name));
            if refusals.is_empty() || !named {
                return Err(format!(
                    "refusals that do not name {}: {refusals:?}",
                    m.name
                ));
            }
            Ok("read, refused by the check")
        }
    }
}
