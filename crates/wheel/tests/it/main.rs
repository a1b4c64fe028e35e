//! The integration tests of `gpuimg-wheel`, one binary: the installer on wheels the tests
//! write (`install`: where each scheme's files land, the `.pyc`, the taps, and every refusal,
//! one served by a loopback index). The wheel writers, the index and its server and the heap
//! counter are the root package's test support (`tests/it/common`), taken by path so that they
//! have one home; `common::heap` is this binary's global allocator too, so a test sees the
//! most the installer held. Run one area with `cargo test -p gpuimg-wheel --test it <module>::`.

#[global_allocator]
static ALLOC: common::heap::Heap = common::heap::Heap;

#[path = "../../../../tests/it/common/heap.rs"]
#[allow(dead_code)]
mod heap;
#[path = "../../../../tests/it/common/http.rs"]
#[allow(dead_code)]
mod http;
#[path = "../../../../tests/it/common/pyindex.rs"]
#[allow(dead_code)]
mod pyindex;
#[path = "../../../../tests/it/common/wheel.rs"]
#[allow(dead_code)]
mod wheel;
#[path = "../../../../tests/it/common/wheel_zip.rs"]
#[allow(dead_code)]
mod wheel_zip;
#[path = "../../../../tests/it/common/zip64_end.rs"]
#[allow(dead_code)]
mod zip64_end;

/// The support above under the names it has in the root's tests (`crate::common::…`).
mod common {
    pub(crate) use super::http::*;
    pub(crate) use super::wheel::*;
    pub(crate) use super::{heap, pyindex, wheel, wheel_zip, zip64_end};
}

mod install;
