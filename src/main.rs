//! The `gpuimg` binary: parse arguments, run one command, render errors once, pick the exit code.

fn main() -> std::process::ExitCode {
    gpuimg::cli::main()
}
