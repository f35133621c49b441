//! The monitor's errors: what a failover step met.

use sextant_backend::BackendError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FailoverError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{addr} did not answer within {ms} ms")]
    Timeout { addr: String, ms: u64 },
    /// A step that ran but did not get what it needs (why).
    #[error("{0}")]
    Step(String),
}
