//! `gpuimg-store`: what a build keeps on disk and how it names it: content digests
//! (`digest`), canonical JSON (`canonical_json`), a file's identity (`file_identity`), the
//! build's temporary files (`staging`), the shared content-addressed cache (`cache`),
//! root-confined file-system access under a staging root (`confined`), and the one opener of a
//! file a user names (`user_file`: regular files on real file systems, never a blocking open),
//! and sizes as a user writes and reads them (`byte_size`).
//! Depends on no other crate of the workspace; must never fetch, parse a profile, or know what
//! an image is.

pub mod byte_size;
pub mod cache;
pub mod canonical_json;
pub mod confined;
pub mod digest;
pub mod file_identity;
pub mod staging;
pub mod user_file;
