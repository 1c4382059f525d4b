//! The conformance suite: one set of behavioural tests that every [`Backend`] must pass.
//!
//! A store crate implements [`Harness`] (how to make a fresh, isolated store that reads time
//! from a [`ManualClock`], and how to clean it up) and expands
//! [`conformance_tests!`](crate::conformance_tests) in one of its test files.

use std::future::Future;

use crate::backend::Backend;
use crate::clock::ManualClock;

/// Makes fresh, isolated stores for the conformance tests.
pub trait Harness: Send + Sync + 'static {
    /// The store under test.
    type Backend: Backend;

    /// A new, empty store (its own schema, key prefix or folder) whose time comes from `clock`.
    fn create(&self, clock: ManualClock) -> impl Future<Output = Self::Backend> + Send;

    /// Removes everything `create` made.
    fn cleanup(&self, backend: Self::Backend) -> impl Future<Output = ()> + Send;
}
