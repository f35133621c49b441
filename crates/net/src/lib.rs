//! What both sides of the proxy use to talk: the socket type (TCP, Unix,
//! TLS over either), TLS configurations (to clients and to servers), and
//! RSA for caching_sha2_password's key exchange (sextant decrypts what
//! clients send, and encrypts what servers ask for).

pub mod stream;
pub mod tls;

pub use stream::Stream;
pub use tls::{NetError, RsaKeys};
