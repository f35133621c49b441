//! The errors of a config file: each names the file, the line and the key.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        source: crate::files::FileError,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}{}: {key}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        path: String,
        line: Option<usize>,
        key: String,
        message: String,
    },
    /// Several problems, one per line.
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<ConfigError>),
}
