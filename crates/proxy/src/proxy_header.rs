//! The PROXY protocol header (v1 text, v2 binary) that a load balancer
//! (HAProxy `send-proxy`/`send-proxy-v2`, AWS NLB, ...) puts before a
//! client's first byte, so that sextant knows the real client: its logs,
//! SHOW SESSIONS, the failed-login lockout and per-address limits then see
//! the client, not the balancer.
//!
//! Trust is by network: a header is read only from the networks
//! `[proxy] proxy_protocol_from` lists, and from those it is required (a
//! connection from there without one is refused); anyone else who sends
//! one is refused too (`Client::read_first_packet`), since a header from
//! an untrusted peer is a client trying to choose its own address. The
//! header is parsed by the `ppp` crate; reading it off the socket without
//! taking any byte of what follows is sextant's.

use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The v2 signature; v1 starts with "PROXY ".
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// A v1 header is at most 107 bytes, CRLF included.
const V1_MAX: usize = 107;
/// A v2 header's address block is at most this long (TLVs included):
/// more is a header sextant does not take.
const V2_MAX_BLOCK: usize = 1024;

/// Whether a connection's first bytes (at least 4) are the start of a
/// PROXY header.
pub fn looks_like_header(first: &[u8]) -> bool {
    first.len() >= 4
        && (b"PROXY ".starts_with(&first[..first.len().min(6)])
            || V2_SIGNATURE.starts_with(&first[..first.len().min(12)]))
}

/// The networks load balancers connect from.
#[derive(Debug, Default, Clone)]
pub struct Trusted(Vec<IpNet>);

impl Trusted {
    /// From the config's list (checked there: every entry parses).
    pub fn new(list: &[String]) -> Trusted {
        Trusted(
            list.iter()
                .filter_map(|s| sextant_config::parse_network(s))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            // An IPv4 client on a dual-stack listener.
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|n| n.contains(&ip))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("the connection closed before its PROXY protocol header")]
    Closed,
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
    #[error("no PROXY protocol header, which connections from this network must send ([proxy] proxy_protocol_from)")]
    Missing,
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(String),
}

/// Reads the header a trusted balancer sent, and nothing after it. The
/// client it names; None for a connection of the balancer's own (v1
/// UNKNOWN, v2 LOCAL: a health check), which keeps its peer.
pub async fn read(stream: &mut TcpStream) -> Result<Option<SocketAddr>, HeaderError> {
    let mut head = [0u8; 16];
    stream.read_exact(&mut head[..6]).await.map_err(closed)?;
    if &head[..6] == b"PROXY " {
        let line = read_v1_line(stream).await?;
        let mut text = b"PROXY ".to_vec();
        text.extend_from_slice(&line);
        return v1_source(&text);
    }
    if head[..6] != V2_SIGNATURE[..6] {
        return Err(HeaderError::Missing);
    }
    stream.read_exact(&mut head[6..]).await.map_err(closed)?;
    if head[..12] != V2_SIGNATURE {
        return Err(HeaderError::Missing);
    }
    let len = u16::from_be_bytes([head[14], head[15]]) as usize;
    if len > V2_MAX_BLOCK {
        return Err(HeaderError::Malformed(format!(
            "a v2 address block of {len} bytes"
        )));
    }
    let mut all = Vec::with_capacity(16 + len);
    all.extend_from_slice(&head);
    all.resize(16 + len, 0);
    stream.read_exact(&mut all[16..]).await.map_err(closed)?;
    v2_source(&all)
}

/// The rest of a v1 line after "PROXY ", CRLF included, read without
/// taking a byte past it: peeked, then read as far as the CRLF. What has
/// arrived without a CRLF is all the line's, so it is taken, and the next
/// peek waits for more (peeking again at bytes already there would return
/// at once, a busy loop for as long as a client sends half a line).
async fn read_v1_line(stream: &mut TcpStream) -> Result<Vec<u8>, HeaderError> {
    let mut buf = [0u8; V1_MAX];
    let mut line = Vec::with_capacity(V1_MAX);
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(HeaderError::Closed);
        }
        let end = match line.last() == Some(&b'\r') && buf[0] == b'\n' {
            true => Some(1),
            false => buf[..n]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map(|i| i + 2),
        };
        let take = end.unwrap_or(n);
        if line.len() + take + 6 > V1_MAX {
            return Err(HeaderError::Malformed(
                "a v1 line longer than 107 bytes".into(),
            ));
        }
        let from = line.len();
        line.resize(from + take, 0);
        stream.read_exact(&mut line[from..]).await.map_err(closed)?;
        if end.is_some() {
            return Ok(line);
        }
    }
}

fn closed(e: std::io::Error) -> HeaderError {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => HeaderError::Closed,
        _ => HeaderError::Io(e),
    }
}

fn v1_source(text: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    let s = std::str::from_utf8(text).map_err(|_| HeaderError::Malformed("not text".into()))?;
    let h = ppp::v1::Header::try_from(s).map_err(|e| HeaderError::Malformed(e.to_string()))?;
    Ok(match h.addresses {
        ppp::v1::Addresses::Tcp4(a) => {
            Some(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port))
        }
        ppp::v1::Addresses::Tcp6(a) => {
            Some(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port))
        }
        ppp::v1::Addresses::Unknown => None,
    })
}

fn v2_source(bytes: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    let h = ppp::v2::Header::try_from(bytes).map_err(|e| HeaderError::Malformed(e.to_string()))?;
    if h.command == ppp::v2::Command::Local {
        return Ok(None);
    }
    Ok(match h.addresses {
        ppp::v2::Addresses::IPv4(a) => {
            Some(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port))
        }
        ppp::v2::Addresses::IPv6(a) => {
            Some(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port))
        }
        // A Unix socket or no address: the balancer's own connection.
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_give_the_client_address() {
        let v1 = b"PROXY TCP4 203.0.113.7 10.0.0.1 5555 6033\r\n";
        assert_eq!(
            v1_source(v1).unwrap(),
            Some("203.0.113.7:5555".parse().unwrap())
        );
        assert_eq!(v1_source(b"PROXY UNKNOWN\r\n").unwrap(), None);
        assert!(v1_source(b"PROXY TCP4 300.1.1.1 10.0.0.1 1 2\r\n").is_err());
        let mut v2 = V2_SIGNATURE.to_vec();
        // PROXY command, TCP over IPv6.
        v2.extend_from_slice(&[0x21, 0x21, 0, 36]);
        let src: std::net::Ipv6Addr = "2001:db8::7".parse().unwrap();
        v2.extend_from_slice(&src.octets());
        v2.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        v2.extend_from_slice(&4242u16.to_be_bytes());
        v2.extend_from_slice(&6033u16.to_be_bytes());
        assert_eq!(
            v2_source(&v2).unwrap(),
            Some("[2001:db8::7]:4242".parse().unwrap())
        );
        let mut local = V2_SIGNATURE.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        assert_eq!(v2_source(&local).unwrap(), None);
    }

    #[test]
    fn networks_match_addresses_and_mapped_ipv4() {
        let t = Trusted::new(&["10.0.0.0/8".into(), "192.0.2.1".into()]);
        assert!(t.contains("10.2.3.4".parse().unwrap()));
        assert!(t.contains("::ffff:10.2.3.4".parse().unwrap()));
        assert!(t.contains("192.0.2.1".parse().unwrap()));
        assert!(!t.contains("192.0.2.2".parse().unwrap()));
        assert!(sextant_config::parse_network("10.0.0.0/33").is_none());
    }

    #[test]
    fn a_header_is_recognised_from_its_first_bytes() {
        assert!(looks_like_header(b"PROX"));
        assert!(looks_like_header(b"\r\n\r\n"));
        assert!(!looks_like_header(&[0x20, 0, 0, 1]));
    }
}
