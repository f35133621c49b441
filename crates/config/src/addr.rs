//! Server and listener addresses (`host:port` or a Unix socket path), checked when the file is read.

use serde::{Deserialize, Deserializer};
use thiserror::Error;

/// A `host:port` address, or for a server on the same host the absolute
/// path of its Unix socket; checked when the file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr(pub String);

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Addr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        check_addr(&s).map_err(serde::de::Error::custom)?;
        Ok(Addr(s))
    }
}

impl Addr {
    pub fn is_unix_path(&self) -> bool {
        self.0.starts_with('/')
    }
}

/// What is wrong with an address, in the words the config error shows.
#[derive(Debug, Error)]
pub(crate) enum AddrError {
    #[error("a Unix socket path is 2 to 107 bytes long, got {0} bytes")]
    SocketPath(usize),
    #[error("expected \"host:port\", got {0:?}")]
    NoPort(String),
    #[error("expected \"host:port\", got {0:?} (no host)")]
    NoHost(String),
    #[error("expected \"host:port\" with a port from 1 to 65535, got {0:?}")]
    BadPort(String),
}

pub(crate) fn check_addr(s: &str) -> Result<(), AddrError> {
    if s.starts_with('/') {
        // sun_path holds 108 bytes with its terminating NUL.
        return match s.len() {
            2..=107 => Ok(()),
            n => Err(AddrError::SocketPath(n)),
        };
    }
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| AddrError::NoPort(s.to_string()))?;
    if host.is_empty() {
        return Err(AddrError::NoHost(s.to_string()));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(AddrError::BadPort(s.to_string())),
    }
}
