use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtoError {
    #[error("packet truncated while reading {0}")]
    Truncated(&'static str),
    #[error("unexpected packet 0x{byte:02x} while {state}")]
    Unexpected { state: &'static str, byte: u8 },
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("protocol version {0} is not supported (only v10)")]
    UnsupportedProtocol(u8),
}
