//! apt repositories: resolve, verify, fetch and unpack .deb packages (issue 3).

mod control;
mod relation;
mod version;
