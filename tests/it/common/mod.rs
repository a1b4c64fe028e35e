//! Support for the integration tests, in one place: each test module says `use crate::common;`
//! and uses what it needs. `sandbox` is the only way a test starts the built binaries (isolated
//! configuration, cache and epoch); `cmd` runs any command with failure messages that name
//! it; `fs` writes, reads and lists files; `image` makes root filesystems and checks images;
//! `apt_repo` and `http` make and serve a signed fixture apt repository; `pyindex` writes a
//! Python package index (wheels and pages) for `http` to serve, `hostile_index` what a hostile
//! one serves;
//! `wheel` writes single wheels, truthful or lying, for the installer; `registry` runs a real
//! OCI registry (plain, TLS with htpasswd, or token auth) and `proxy` a TCP proxy that stalls
//! after so many bytes, for the push tests; `fake_registry` a hostile one whose every answer
//! the test chooses (silence and drips too), and `hostile_push` what the tests against it
//! share (a tiny image, a library push with chosen limits); `fake_cuda` builds a fake
//! `libcuda.so.1` and a small CUDA library with `gcc` for the self-test's loading paths;
//! `error_snapshot` compares an error message whole with its reviewed snapshot (the parts
//! that vary redacted); `peak` waits for a child and gives its peak memory (the kernel's `ru_maxrss`); `stop`
//! starts a build that stops itself at a chosen point (the binaries' test hook); `heap` is the binary's allocator (a thread's peak heap, the fuzz child's cap); `wheel_zip`
//! and `zip64_end` edit a zip's directory (millions of entries, zip64 end records).
#![allow(dead_code, unused_imports)]

pub mod apt_repo;
pub mod arm64;
pub mod cmd;
pub mod error_snapshot;
pub mod fake_cuda;
pub mod fake_registry;
pub mod fs;
pub mod heap;
pub mod hostile_index;
pub mod hostile_push;
pub mod http;
pub mod image;
pub mod node;
pub mod node_tree;
pub mod peak;
pub mod proxy;
pub mod pyindex;
pub mod registry;
pub mod sandbox;
pub mod stop;
pub mod wheel;
pub mod wheel_zip;
pub mod zip64_end;

pub use apt_repo::*;
pub use cmd::*;
pub use error_snapshot::*;
pub use fake_registry::*;
pub use fs::*;
pub use hostile_push::*;
pub use http::*;
pub use image::*;
pub use peak::*;
pub use proxy::*;
pub use registry::*;
pub use sandbox::*;
pub use stop::*;
pub use wheel::*;
