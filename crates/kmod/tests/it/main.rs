//! The integration tests of `gpuimg-kmod`, one binary, against real Debian kernels: the build
//! host's suite's cloud kernel (`linux-image-<abi>`, `linux-headers-<abi>` and its `-common`)
//! and trixie's (6.12), each fetched once from the host's Debian mirror by
//! `scripts/kernel-fixture.sh` into `target/kernel-fixture*` (`kernel`); every module each ships
//! checked against its own `Module.symvers`, and each refusal made from those real bytes (`refusals`); truncated and
//! corrupted modules read without a panic (`malformed`). Needs the network the first time, and
//! `apt-get` and `dpkg`. Run one area with `cargo test -p gpuimg-kmod --test it <module>::`.

#[path = "../../../../tests/it/common/cmd.rs"]
#[allow(dead_code)]
mod cmd;

mod kernel;
mod malformed;
mod refusals;
mod seed;
