//! What a blocking call does to a queue, as the turn-taking (`turns`) and its per-thread
//! windows of calls (`window`) count it.

/// What a blocking call does to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// A push (or a wait for room and then a push).
    Push,
    /// A pop (or a wait for an item).
    Pop,
}
