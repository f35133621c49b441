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
    /// A compressed frame announces more than a packet may hold.
    #[error("compressed frame of {size} bytes, over max_allowed_packet ({max})")]
    FrameTooLarge { size: usize, max: usize },
    /// A compressed frame's sequence id neither starts a command (0) nor
    /// follows the last frame.
    #[error("compressed frame {got} out of order (expected {expected} or 0)")]
    FrameOutOfOrder { expected: u8, got: u8 },
    /// A compressed frame that does not inflate to what its header says.
    #[error("{0}")]
    Uncompress(&'static str),
}
