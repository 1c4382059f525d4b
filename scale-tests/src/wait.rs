//! Waiting for an observable event, with a deadline.

use std::time::{Duration, Instant};

use crate::HarnessError;

/// How often [`wait_for`] looks again.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// Calls `probe` until it returns `Some`, at most for `timeout`; the error names `what`.
///
/// ```
/// use std::time::Duration;
/// let mut n = 0;
/// let found = fairq_scale_tests::wait_for("the third look", Duration::from_secs(5), || {
///     n += 1;
///     (n == 3).then_some(n)
/// });
/// assert_eq!(found.unwrap(), 3);
/// assert!(fairq_scale_tests::wait_for("nothing", Duration::from_millis(20), || None::<()>).is_err());
/// ```
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe() {
            return Ok(found);
        }
        if Instant::now() >= deadline {
            return Err(HarnessError::Timeout {
                what: what.to_string(),
                after: timeout,
            });
        }
        std::thread::sleep(PROBE_EVERY);
    }
}
