//! The `fairq` binary: everything happens in [`fairq_cli::main_with`].
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    fairq_cli::main_with(std::env::args_os())
}
