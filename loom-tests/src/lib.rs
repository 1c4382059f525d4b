//! Loom models of the `fairq-blocking` hand-off protocol and of the `fairq-journal`
//! wake-ups (the reader doorbell, and concurrent puts electing a leader that writes for all).
//!
//! The models are integration tests in `tests/`; they only exist when compiled with
//! `--cfg loom`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p fairq-loom-tests --release
//! ```
//!
//! Without `--cfg loom` this crate is empty and its tests compile to nothing.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
