use thiserror::Error;

/// A layout that cannot be used, with where it went wrong.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("{file}: line {line}, column {column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// `key` is the path to the value at fault (`vdb[0].partitions`),
    /// `line` where that value starts in the file (0 when unknown).
    #[error("{file}: line {line}: {key}: {message}")]
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
}
