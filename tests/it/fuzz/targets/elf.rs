//! Target `elf`: the ELF reader that indexes a package's shared libraries for `ld.so.cache`
//! (class, machine, `DT_SONAME`; `gpuimg_apt::parsers::parse_elf`).
//!
//! Seeds are two tiny real shared objects (64- and 32-bit, built by `scripts/fuzz-corpus.sh`);
//! mutations overwrite header and table fields with edge numbers. Properties: a parsed object's
//! class and machine are the header's, and its soname is NUL-terminated text of the file; the
//! stream reader (`gpuimg_elf::parse_stream`, for wheel members) never disagrees with the
//! whole-file reader when both read the file; and the capture the layer writer feeds
//! (`gpuimg_elf::capture`), fed in pieces of any size, either leaves the answer to its
//! caller or gives exactly what the stream reader gives when it reads on to the end for the
//! library names the file holds (`parse_stream_named`); and the section stripper
//! (`gpuimg_elf::strip`, for `strip: [debug-symbols]`) either leaves a file alone or writes
//! one of the planned, smaller size that reads the same to the ELF reader and has nothing
//! left to strip.

use arbitrary::{Result, Unstructured};
use gpuimg_apt::parsers::parse_elf;

use crate::fuzz::harness::{files, Target, Verdict};
use crate::fuzz::mutate::{self, ByteOp, INTERESTING};

pub static TARGET: Target = Target {
    name: "elf",
    seeds,
    mutate: mutate_input,
    check,
    iterations: 30_000,
};

fn seeds() -> Vec<Vec<u8>> {
    files("corpus", "elf").into_iter().map(|(_, b)| b).collect()
}

fn mutate_input(seeds: &[Vec<u8>], u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut data = mutate::pick_seed(u, seeds)?.to_vec();
    // Mostly aligned integer fields (offsets, counts, addresses), sometimes anything.
    for _ in 0..u.int_in_range(1..=6)? {
        if u.ratio(3, 4)? && data.len() >= 8 {
            let width = [2usize, 4, 8][u.choose_index(3)?];
            let at = u.choose_index(data.len() / width)? * width;
            let v = INTERESTING[u.choose_index(INTERESTING.len())?];
            let end = (at + width).min(data.len());
            let n = end - at;
            data[at..end].copy_from_slice(&v.to_le_bytes()[..n]);
        } else {
            let op: ByteOp = u.arbitrary()?;
            op.apply(&mut data, &[b"\x7fELF", b"\0"], seeds);
        }
    }
    Ok(data)
}

fn check(b: &[u8]) -> Verdict {
    let streamed = gpuimg_elf::parse_stream(&mut &b[..], &mut |off, len| {
        gpuimg_elf::range_at(&mut &b[..], off, len)
    });
    let named = gpuimg_elf::parse_stream_named(&mut &b[..], &mut |off, len| {
        gpuimg_elf::range_at(&mut &b[..], off, len)
    });
    // Pieces of a size the input picks (1 to 4096 bytes), and the whole file at once.
    let piece = b.get(7).map_or(1, |&x| usize::from(x) * 16 + 1);
    for size in [piece, b.len().max(1)] {
        let mut c = gpuimg_elf::capture::Capture::new();
        for (i, p) in b.chunks(size).enumerate() {
            c.feed((i * size) as u64, p);
        }
        let mut again = |off, len| gpuimg_elf::range_at(&mut &b[..], off, len);
        if let Some(taken) = c.finish(b.len() as u64, &mut again) {
            if taken != named {
                return Err(format!(
                    "the capture (pieces of {size}) says {taken:?}, the stream reader {named:?}"
                ));
            }
        }
    }
    check_strip(b)?;
    let Some(so) = parse_elf(b) else {
        return Ok("not read");
    };
    if let Some(s) = &streamed {
        if *s != so {
            return Err(format!(
                "the stream reader says {s:?}, the whole file {so:?}"
            ));
        }
    }
    if so.is_64 != (b.get(4) == Some(&2)) {
        return Err(format!(
            "class is_64={} but the header says {:?}",
            so.is_64,
            b.get(4)
        ));
    }
    let machine = b.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]]));
    if Some(so.machine) != machine {
        return Err(format!(
            "machine {} but the header says {machine:?}",
            so.machine
        ));
    }
    if let Some(name) = &so.soname {
        if name.contains('\0') {
            return Err(format!("soname {name:?} holds a NUL"));
        }
        let needle: Vec<u8> = name.bytes().chain([0]).collect();
        if !name.contains('\u{fffd}') && !b.windows(needle.len()).any(|w| w == needle) {
            return Err(format!(
                "soname {name:?} is not NUL-terminated text of the file"
            ));
        }
        return Ok("read with a soname");
    }
    Ok("read without a soname")
}

fn check_strip(b: &[u8]) -> std::result::Result<(), String> {
    use gpuimg_elf::strip::plan_reader;
    let len = b.len() as u64;
    let plan = match plan_reader(&mut std::io::Cursor::new(b), len) {
        Ok(Some(p)) => p,
        // Left alone, or the bytes ran out (a read error: the file is left alone too).
        Ok(None) | Err(_) => return Ok(()),
    };
    let mut out = Vec::new();
    plan.write_reader(&mut std::io::Cursor::new(b), &mut out)
        .map_err(|e| format!("planned a strip it could not write: {e}"))?;
    if plan.new_size >= plan.file_size {
        return Err(format!(
            "planned a strip that does not shrink the file ({} → {} bytes)",
            plan.file_size, plan.new_size
        ));
    }
    if out.len() as u64 != plan.new_size {
        return Err(format!(
            "wrote {} bytes, planned {}",
            out.len(),
            plan.new_size
        ));
    }
    if parse_elf(&out) != parse_elf(b) {
        return Err(format!(
            "the stripped file reads {:?}, the original {:?}",
            parse_elf(&out),
            parse_elf(b)
        ));
    }
    let again = plan_reader(&mut std::io::Cursor::new(&out[..]), out.len() as u64);
    if !matches!(again, Ok(None)) {
        return Err(format!(
            "the stripped file has more to strip: {:?}",
            again.map(|p| p.map(|p| p.removed))
        ));
    }
    Ok(())
}
