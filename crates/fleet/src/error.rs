use thiserror::Error;

#[derive(Debug, Error)]
pub enum FleetError {
    /// etcd did not answer: nothing was changed anywhere.
    #[error("the fleet store (etcd at {endpoints}) is unreachable: {reason}; nothing was changed (a change made here alone would not reach the other instances)")]
    Unreachable { endpoints: String, reason: String },
    /// The intent changed since this instance last saw it: another
    /// instance's change won, and this one was not made.
    #[error("{intent} was changed at revision {current} by another instance since this one saw revision {seen}; nothing was changed: look again (SHOW FLEET) and retry")]
    Conflict {
        intent: String,
        seen: i64,
        current: i64,
    },
    #[error("instance id: {0}")]
    InstanceId(String),
    #[error("etcd TLS files: {0}")]
    Tls(String),
}
