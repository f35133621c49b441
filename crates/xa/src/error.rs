use thiserror::Error;

#[derive(Debug, Error)]
pub enum XaError {
    /// The decision log could not be written or synced: nothing may
    /// commit until it can.
    #[error("the decision log {path}: {source}")]
    Log {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The log's writer is gone (the process is stopping).
    #[error("the decision log is closed")]
    Closed,
    #[error("{0}")]
    Invalid(String),
}
