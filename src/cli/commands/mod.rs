//! One file per command: clap arguments and a short `exec`.

pub mod build;
pub mod cache;
pub mod catalog;
pub mod inspect;
pub mod lock;
pub mod resolve;
pub mod verify_host;
