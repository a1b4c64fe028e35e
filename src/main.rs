//! The `gpuimg` binary: parse arguments, run one command, render errors once, pick the exit code.

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    gpuimg::cli::main()
}

/// glibc gives threads malloc arenas of their own (up to eight per CPU) and keeps what a
/// thread freed in its arena for that arena's next use. A build starts short-lived threads by
/// the hundred (an inflating thread per large wheel file, download and unpack workers), so
/// freed buffers pile up across arenas: the PyTorch image's cold build peaked at 240-285 MB
/// with glibc's default and at 155-162 MB with two arenas, in the same time (BENCHMARKS.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets a parameter of glibc's allocator, and this runs before any
    // other thread exists. A refusal (0) leaves glibc's default, which is only slower to free.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
