//! The integration tests of `gpuimg-apt`, one binary: the client against a fixture repository
//! served on loopback, one module per area (`resolve`, `install`, `trust`, `system`: a root that boots; the case they share
//! in `fixture`), and against the build host's own mirror (`host`: needs root, the network and
//! dpkg). The fixture repository, its server and the file helpers are the root
//! package's test support (`tests/it/common`), taken by path so that they have one home; they
//! need `dpkg-deb`, `dpkg-query` and `gpg`. Run one area with
//! `cargo test -p gpuimg-apt --test it <module>::`.

#[path = "../../../../tests/it/common/apt_repo.rs"]
#[allow(dead_code)]
mod apt_repo;
#[path = "../../../../tests/it/common/cmd.rs"]
#[allow(dead_code)]
mod cmd;
#[path = "../../../../tests/it/common/fs.rs"]
#[allow(dead_code)]
mod fs;
#[path = "../../../../tests/it/common/http.rs"]
#[allow(dead_code)]
mod http;

mod fixture;
mod host;
mod install;
mod resolve;
mod system;
mod trust;
