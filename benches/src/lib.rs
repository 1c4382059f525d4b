//! Shared helpers for the fairq benchmarks.
