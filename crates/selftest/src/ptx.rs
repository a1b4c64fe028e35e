//! The embedded PTX kernel of the functional check, and the host-side reference it is checked against.
//!
//! PTX `.version 7.0` / `.target sm_52`: any R450+ driver JITs it for every GPU it supports, so
//! the kernel never demands a newer driver than the image admits. Hand-written; no toolkit.

/// Entry point name inside [`PTX`].
pub const ENTRY: &str = "gpuimg_mix";

/// `out[i] = (in[i] * 0x2545F491) ^ seed` for `i < n` (32-bit wrapping arithmetic).
pub const PTX: &str = "\
.version 7.0
.target sm_52
.address_size 64

.visible .entry gpuimg_mix(
\t.param .u64 gpuimg_mix_out,
\t.param .u64 gpuimg_mix_in,
\t.param .u32 gpuimg_mix_n,
\t.param .u32 gpuimg_mix_seed
)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<10>;
\t.reg .b64 %rd<8>;

\tld.param.u64 %rd1, [gpuimg_mix_out];
\tld.param.u64 %rd2, [gpuimg_mix_in];
\tld.param.u32 %r1, [gpuimg_mix_n];
\tld.param.u32 %r2, [gpuimg_mix_seed];
\tmov.u32 %r3, %ctaid.x;
\tmov.u32 %r4, %ntid.x;
\tmov.u32 %r5, %tid.x;
\tmad.lo.u32 %r6, %r3, %r4, %r5;
\tsetp.ge.u32 %p1, %r6, %r1;
\t@%p1 bra DONE;
\tcvta.to.global.u64 %rd3, %rd2;
\tcvta.to.global.u64 %rd4, %rd1;
\tmul.wide.u32 %rd5, %r6, 4;
\tadd.s64 %rd6, %rd3, %rd5;
\tld.global.u32 %r7, [%rd6];
\tmul.lo.u32 %r8, %r7, 625341585;
\txor.b32 %r9, %r8, %r2;
\tadd.s64 %rd7, %rd4, %rd5;
\tst.global.u32 [%rd7], %r9;
DONE:
\tret;
}
";

/// What the kernel must produce for one input element.
pub fn expected(input: u32, seed: u32) -> u32 {
    input.wrapping_mul(0x2545_F491) ^ seed
}

/// The input the check uploads: a pattern that differs per element and per seed.
pub fn input(i: u32, seed: u32) -> u32 {
    i.rotate_left(7) ^ seed.wrapping_mul(0x9E37_79B9)
}

/// Index and value of the first element that differs from the reference, if any.
pub fn first_mismatch(inputs: &[u32], outputs: &[u32], seed: u32) -> Option<(usize, u32, u32)> {
    if inputs.len() != outputs.len() {
        return Some((inputs.len().min(outputs.len()), 0, 0));
    }
    inputs
        .iter()
        .zip(outputs)
        .enumerate()
        .find(|(_, (i, o))| expected(**i, seed) != **o)
        .map(|(idx, (i, o))| (idx, expected(*i, seed), *o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_header_and_constant_agree() {
        assert!(PTX.starts_with(".version 7.0\n.target sm_52\n"));
        assert!(PTX.contains(&format!(".entry {ENTRY}(")));
        assert!(PTX.contains(&format!("mul.lo.u32 %r8, %r7, {};", 0x2545_F491u32)));
    }

    #[test]
    fn mismatch_is_found_anywhere() {
        let seed = 7;
        let ins: Vec<u32> = (0..1000).map(|i| input(i, seed)).collect();
        let mut outs: Vec<u32> = ins.iter().map(|i| expected(*i, seed)).collect();
        assert_eq!(first_mismatch(&ins, &outs, seed), None);
        outs[999] ^= 1;
        assert_eq!(first_mismatch(&ins, &outs, seed).map(|m| m.0), Some(999));
    }
}
