//! Connection phase: the server's initial handshake (protocol v10), the
//! client's handshake response (protocol 4.1), SSL request and auth switch.

use crate::codec::{write_lenenc_bytes, Reader};
use crate::consts::cap;
use crate::ProtoError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialHandshake {
    pub server_version: String,
    pub connection_id: u32,
    /// The 20-byte nonce (both parts, without the trailing NUL).
    pub nonce: Vec<u8>,
    pub capabilities: u32,
    pub charset: u8,
    pub status: u16,
    pub auth_plugin: String,
    /// MariaDB's extended capabilities (see [`crate::consts::mariadb_cap`]);
    /// 0 unless `capabilities` leaves out CLIENT_MYSQL.
    pub mariadb_caps: u32,
}

impl InitialHandshake {
    pub fn parse(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let proto = r.u8("protocol version")?;
        if proto != 10 {
            return Err(ProtoError::UnsupportedProtocol(proto));
        }
        let server_version = String::from_utf8_lossy(r.nul_bytes("server version")?).into_owned();
        let connection_id = r.u32("connection id")?;
        let mut nonce = r.bytes(8, "auth data part 1")?.to_vec();
        r.u8("filler")?;
        let cap_lo = r.u16("capabilities")? as u32;
        let mut capabilities = cap_lo;
        let mut charset = 0;
        let mut status = 0;
        let mut auth_plugin = String::new();
        let mut mariadb_caps = 0;
        if !r.is_empty() {
            charset = r.u8("charset")?;
            status = r.u16("status")?;
            capabilities |= (r.u16("capabilities")? as u32) << 16;
            let auth_len = r.u8("auth data length")? as usize;
            let reserved = r.bytes(10, "reserved")?;
            if capabilities & cap::LONG_PASSWORD == 0 {
                mariadb_caps =
                    u32::from_le_bytes([reserved[6], reserved[7], reserved[8], reserved[9]]);
            }
            if capabilities & cap::SECURE_CONNECTION != 0 {
                let n = auth_len.saturating_sub(8).max(13);
                let part2 = r.bytes(n.min(r.remaining()), "auth data part 2")?;
                let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
                nonce.extend_from_slice(part2);
            }
            if capabilities & cap::PLUGIN_AUTH != 0 {
                auth_plugin = String::from_utf8_lossy(r.nul_or_eof_bytes()).into_owned();
            }
        }
        Ok(InitialHandshake {
            server_version,
            connection_id,
            nonce,
            capabilities,
            charset,
            status,
            auth_plugin,
            mariadb_caps,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(10);
        out.extend_from_slice(self.server_version.as_bytes());
        out.push(0);
        out.extend_from_slice(&self.connection_id.to_le_bytes());
        out.extend_from_slice(&self.nonce[..8]);
        out.push(0);
        out.extend_from_slice(&(self.capabilities as u16).to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&((self.capabilities >> 16) as u16).to_le_bytes());
        out.push(self.nonce.len() as u8 + 1);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&self.mariadb_caps.to_le_bytes());
        out.extend_from_slice(&self.nonce[8..]);
        out.push(0);
        out.extend_from_slice(self.auth_plugin.as_bytes());
        out.push(0);
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandshakeResponse {
    pub capabilities: u32,
    pub max_packet: u32,
    pub charset: u8,
    pub user: String,
    pub auth_response: Vec<u8>,
    pub database: Option<String>,
    pub auth_plugin: Option<String>,
    pub attrs: Vec<(String, String)>,
    /// MariaDB's extended capabilities; 0 unless `capabilities` leaves out
    /// CLIENT_MYSQL.
    pub mariadb_caps: u32,
    /// The zstd level a client with CLIENT_ZSTD_COMPRESSION_ALGORITHM asks for.
    pub zstd_level: u8,
}

/// Length of an SSLRequest payload: the first fields of a handshake response.
pub const SSL_REQUEST_LEN: usize = 32;

/// A handshake response that is only an SSLRequest (the client wants TLS
/// before it sends anything else).
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == SSL_REQUEST_LEN
        && u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]) & cap::SSL != 0
}

impl HandshakeResponse {
    pub fn parse(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let capabilities = r.u32("capabilities")?;
        if capabilities & cap::PROTOCOL_41 == 0 {
            return Err(ProtoError::Malformed(
                "handshake response (pre-4.1 clients are not supported)",
            ));
        }
        let max_packet = r.u32("max packet size")?;
        let charset = r.u8("charset")?;
        let filler = r.bytes(23, "filler")?;
        let mariadb_caps = match capabilities & cap::LONG_PASSWORD {
            0 => u32::from_le_bytes([filler[19], filler[20], filler[21], filler[22]]),
            _ => 0,
        };
        let user = String::from_utf8_lossy(r.nul_bytes("user name")?).into_owned();
        let auth_response = if capabilities & cap::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            r.lenenc_bytes("auth response")?.to_vec()
        } else if capabilities & cap::SECURE_CONNECTION != 0 {
            let n = r.u8("auth response length")? as usize;
            r.bytes(n, "auth response")?.to_vec()
        } else {
            r.nul_bytes("auth response")?.to_vec()
        };
        let mut database = None;
        if capabilities & cap::CONNECT_WITH_DB != 0 && !r.is_empty() {
            let db = r.nul_or_eof_bytes();
            if !db.is_empty() {
                database = Some(String::from_utf8_lossy(db).into_owned());
            }
        }
        let mut auth_plugin = None;
        if capabilities & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
            auth_plugin = Some(String::from_utf8_lossy(r.nul_or_eof_bytes()).into_owned());
        }
        let mut attrs = Vec::new();
        if capabilities & cap::CONNECT_ATTRS != 0 && !r.is_empty() {
            let all = r.lenenc_bytes("connection attributes")?;
            let mut a = Reader::new(all);
            while !a.is_empty() {
                let k = a.lenenc_bytes("attribute name")?;
                let v = a.lenenc_bytes("attribute value")?;
                attrs.push((
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ));
            }
        }
        let mut zstd_level = 0;
        if capabilities & cap::ZSTD_COMPRESSION != 0 && !r.is_empty() {
            zstd_level = r.u8("zstd compression level")?;
        }
        Ok(HandshakeResponse {
            capabilities,
            max_packet,
            charset,
            user,
            auth_response,
            database,
            auth_plugin,
            attrs,
            mariadb_caps,
            zstd_level,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut caps = self.capabilities | cap::PROTOCOL_41;
        if self.database.is_some() {
            caps |= cap::CONNECT_WITH_DB;
        } else {
            caps &= !cap::CONNECT_WITH_DB;
        }
        out.extend_from_slice(&caps.to_le_bytes());
        out.extend_from_slice(&self.max_packet.to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&[0; 19]);
        out.extend_from_slice(&self.mariadb_caps.to_le_bytes());
        out.extend_from_slice(self.user.as_bytes());
        out.push(0);
        if caps & cap::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            write_lenenc_bytes(out, &self.auth_response);
        } else {
            out.push(self.auth_response.len() as u8);
            out.extend_from_slice(&self.auth_response);
        }
        if let Some(db) = &self.database {
            out.extend_from_slice(db.as_bytes());
            out.push(0);
        }
        if caps & cap::PLUGIN_AUTH != 0 {
            out.extend_from_slice(self.auth_plugin.as_deref().unwrap_or("").as_bytes());
            out.push(0);
        }
        if caps & cap::CONNECT_ATTRS != 0 {
            let mut a = Vec::new();
            for (k, v) in &self.attrs {
                write_lenenc_bytes(&mut a, k.as_bytes());
                write_lenenc_bytes(&mut a, v.as_bytes());
            }
            write_lenenc_bytes(out, &a);
        }
        if caps & cap::ZSTD_COMPRESSION != 0 {
            out.push(self.zstd_level);
        }
    }
}

/// AuthSwitchRequest (0xFE, plugin name, plugin data).
pub fn encode_auth_switch(out: &mut Vec<u8>, plugin: &str, data: &[u8]) {
    out.push(0xfe);
    out.extend_from_slice(plugin.as_bytes());
    out.push(0);
    out.extend_from_slice(data);
    out.push(0);
}

pub fn parse_auth_switch(payload: &[u8]) -> Result<(String, Vec<u8>), ProtoError> {
    let mut r = Reader::new(payload);
    if r.u8("auth switch")? != 0xfe {
        return Err(ProtoError::Malformed("auth switch request"));
    }
    let plugin = String::from_utf8_lossy(r.nul_or_eof_bytes()).into_owned();
    let data = r.rest();
    let data = data.strip_suffix(&[0]).unwrap_or(data);
    Ok((plugin, data.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A MariaDB 10.11 initial handshake as captured on the wire
    // (payload only), nonce bytes replaced by a recognisable pattern.
    fn mariadb_greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.6-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh");
        p.push(0);
        p.extend_from_slice(&0xf7feu16.to_le_bytes());
        p.push(45);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0x81ffu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x1d, 0, 0, 0]);
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(b"mysql_native_password\0");
        p
    }

    #[test]
    fn parse_mariadb_greeting() {
        let h = InitialHandshake::parse(&mariadb_greeting()).unwrap();
        assert_eq!(h.server_version, "5.5.5-10.11.6-MariaDB-0+deb12u1");
        assert_eq!(h.connection_id, 7);
        assert_eq!(h.nonce, b"abcdefghijklmnopqrst");
        assert_eq!(h.auth_plugin, "mysql_native_password");
        assert_eq!(h.charset, 45);
        assert!(h.capabilities & cap::PLUGIN_AUTH != 0);
    }

    #[test]
    fn greeting_round_trip() {
        let h = InitialHandshake::parse(&mariadb_greeting()).unwrap();
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(InitialHandshake::parse(&out).unwrap(), h);
    }

    #[test]
    fn truncated_greeting_is_an_error() {
        let g = mariadb_greeting();
        for n in 0..20 {
            assert!(InitialHandshake::parse(&g[..n]).is_err(), "len {n}");
        }
    }

    #[test]
    fn response_round_trip() {
        let r = HandshakeResponse {
            zstd_level: 0,
            mariadb_caps: 0,
            capabilities: cap::PROTOCOL_41
                | cap::SECURE_CONNECTION
                | cap::PLUGIN_AUTH
                | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
                | cap::CONNECT_ATTRS,
            max_packet: 1 << 24,
            charset: 45,
            user: "app".into(),
            auth_response: vec![1; 20],
            database: Some("db1".into()),
            auth_plugin: Some("mysql_native_password".into()),
            attrs: vec![("_client_name".into(), "x".into())],
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        let back = HandshakeResponse::parse(&out).unwrap();
        assert_eq!(back.user, "app");
        assert_eq!(back.database.as_deref(), Some("db1"));
        assert_eq!(back.auth_response, vec![1; 20]);
        assert_eq!(back.attrs, r.attrs);
        assert!(!is_ssl_request(&out));
        assert!(is_ssl_request(&{
            let mut s = (cap::SSL | cap::PROTOCOL_41).to_le_bytes().to_vec();
            s.resize(32, 0);
            s
        }));
    }

    #[test]
    fn auth_switch_round_trip() {
        let mut out = Vec::new();
        encode_auth_switch(&mut out, "caching_sha2_password", b"01234567890123456789");
        let (p, d) = parse_auth_switch(&out).unwrap();
        assert_eq!(p, "caching_sha2_password");
        assert_eq!(d, b"01234567890123456789");
    }
}
