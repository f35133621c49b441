//! Logging in to a server: the handshake, TLS, the auth plugins
//! (native, caching_sha2 with RSA or TLS, ed25519) and auth switches. The
//! password itself (not a scramble of it) goes only to a server whose TLS
//! certificate was verified, or encrypted to a public key pinned in
//! config: never in clear, never to a key the server offers (whoever
//! answers at the address could offer its own and read the password, as
//! libmysqlclient's --get-server-public-key warns).

use super::{BackendConn, ConnectParams, BASE_CAPS};
use crate::error::BackendError;
use sextant_net::stream::Stream;
use sextant_protocol::auth;
use sextant_protocol::consts::{
    cap, CACHING_SHA2_PASSWORD, CLEAR_PASSWORD, ED25519, NATIVE_PASSWORD, SHA256_PASSWORD,
};
use sextant_protocol::handshake::{parse_auth_switch, HandshakeResponse, InitialHandshake};
use sextant_protocol::packets::parse_err;

impl BackendConn {
    pub(super) async fn login(&mut self, p: &ConnectParams<'_>) -> Result<(), BackendError> {
        let (seq, greeting) = self.read_packet().await?;
        if greeting.first() == Some(&0xff) {
            return Err(self.server_error("the connection", &greeting));
        }
        let hs = InitialHandshake::parse(&greeting).map_err(|source| BackendError::Protocol {
            addr: self.addr.to_string(),
            source,
        })?;
        self.server_version = hs.server_version.clone();
        self.connection_id = hs.connection_id;
        let plugin = match hs.auth_plugin.as_str() {
            CACHING_SHA2_PASSWORD => CACHING_SHA2_PASSWORD,
            _ => NATIVE_PASSWORD,
        };
        let mut caps = (BASE_CAPS | p.flavor.caps) & hs.capabilities;
        // A MariaDB server reads extended capabilities from a client that
        // leaves out CLIENT_MYSQL.
        let mariadb = p.flavor.mariadb & hs.mariadb_caps;
        if mariadb != 0 {
            caps &= !cap::LONG_PASSWORD;
        }
        let mut seq = seq.wrapping_add(1);
        if let Some(tls) = p.tls {
            if hs.capabilities & cap::SSL == 0 {
                return Err(BackendError::Tls {
                    addr: self.addr.to_string(),
                    reason: "the server does not offer TLS".into(),
                });
            }
            caps |= cap::SSL;
            let mut req = Vec::with_capacity(32);
            req.extend_from_slice(&caps.to_le_bytes());
            req.extend_from_slice(&(1u32 << 30).to_le_bytes());
            req.push(p.flavor.charset);
            req.extend_from_slice(&[0; 19]);
            req.extend_from_slice(&mariadb.to_le_bytes());
            self.send(seq, &req).await?;
            seq = seq.wrapping_add(1);
            let plain = std::mem::replace(&mut self.stream, Stream::Detached);
            self.stream = plain
                .connect_tls(tls.config.clone(), tls.name.clone())
                .await
                .map_err(|e| BackendError::Tls {
                    addr: self.addr.to_string(),
                    reason: e.to_string(),
                })?;
        }
        let resp = HandshakeResponse {
            zstd_level: 0,
            capabilities: caps,
            max_packet: 1 << 30,
            charset: p.flavor.charset,
            user: p.user.to_string(),
            auth_response: scramble(plugin, p.password.as_bytes(), &hs.nonce),
            database: None,
            auth_plugin: Some(plugin.to_string()),
            attrs: vec![
                ("_client_name".into(), "sextant".into()),
                ("program_name".into(), "sextant".into()),
            ],
            mariadb_caps: mariadb,
        };
        self.negotiated = caps;
        let mut payload = Vec::with_capacity(128);
        resp.encode(&mut payload);
        self.send(seq, &payload).await?;
        // Only a server whose certificate was verified is known to be the
        // server: only it may be sent the password itself.
        let secure = self.stream.is_tls() && p.tls.is_some_and(|t| t.verified);
        let mut plugin = plugin.to_string();
        let mut nonce = hs.nonce;
        loop {
            let (s, pkt) = self.read_packet().await?;
            seq = s.wrapping_add(1);
            match pkt.first() {
                Some(0x00) => return Ok(()),
                Some(0xff) => {
                    let e = parse_err(&pkt).map_err(|source| BackendError::Protocol {
                        addr: self.addr.to_string(),
                        source,
                    })?;
                    return Err(BackendError::Auth {
                        addr: self.addr.to_string(),
                        user: p.user.to_string(),
                        code: e.code,
                        message: String::from_utf8_lossy(e.message).into_owned(),
                    });
                }
                Some(0xfe) => {
                    let (new_plugin, data) =
                        parse_auth_switch(&pkt).map_err(|source| BackendError::Protocol {
                            addr: self.addr.to_string(),
                            source,
                        })?;
                    // The data as sent: a 32-byte nonce may end in a zero
                    // byte that is part of it.
                    let raw = pkt.get(new_plugin.len() + 2..).unwrap_or_default();
                    let answer = match new_plugin.as_str() {
                        NATIVE_PASSWORD | CACHING_SHA2_PASSWORD => {
                            scramble(&new_plugin, p.password.as_bytes(), &data)
                        }
                        ED25519 => {
                            auth::ed25519_sign(p.password.as_bytes(), &raw[..raw.len().min(32)])
                        }
                        SHA256_PASSWORD if secure || p.password.is_empty() => {
                            nul_terminated(p.password)
                        }
                        // Without verified TLS: the password encrypted
                        // with the key pinned in config, never one the
                        // server offers.
                        SHA256_PASSWORD => match p.server_key {
                            Some(pem) => self.rsa_password(pem.as_bytes(), p.password, &data)?,
                            None => return Err(self.needs_secure(p, "sha256_password")),
                        },
                        CLEAR_PASSWORD if secure => nul_terminated(p.password),
                        CLEAR_PASSWORD => {
                            return Err(BackendError::Auth {
                                addr: self.addr.to_string(),
                                user: p.user.to_string(),
                                code: 2059,
                                message: "the server asks for the password in clear \
                                          (mysql_clear_password), which sextant sends only \
                                          over TLS whose certificate it verifies: set tls and \
                                          tls_ca for this server"
                                    .into(),
                            })
                        }
                        _ => {
                            return Err(BackendError::AuthPlugin {
                                addr: self.addr.to_string(),
                                plugin: new_plugin,
                            })
                        }
                    };
                    plugin = new_plugin;
                    nonce = data;
                    self.send(seq, &answer).await?;
                }
                Some(0x01) if plugin == SHA256_PASSWORD => {
                    // A key sent unasked is not used: only a pinned one.
                    let Some(pem) = p.server_key else {
                        return Err(self.needs_secure(p, "sha256_password"));
                    };
                    let ct = self.rsa_password(pem.as_bytes(), p.password, &nonce)?;
                    self.send(seq, &ct).await?;
                }
                Some(0x01) if plugin == CACHING_SHA2_PASSWORD => match pkt.get(1) {
                    // Fast authentication succeeded; the OK follows.
                    Some(3) => {}
                    // Full authentication: the server has no cached entry
                    // for the account and wants the password itself.
                    Some(4) => {
                        if secure {
                            let mut pw = p.password.as_bytes().to_vec();
                            pw.push(0);
                            self.send(seq, &pw).await?;
                        } else if let Some(pem) = p.server_key {
                            let ct = self.rsa_password(pem.as_bytes(), p.password, &nonce)?;
                            self.send(seq, &ct).await?;
                        } else {
                            return Err(self.needs_secure(p, "caching_sha2_password"));
                        }
                    }
                    _ => {
                        return Err(BackendError::Protocol {
                            addr: self.addr.to_string(),
                            source: sextant_protocol::ProtoError::Malformed(
                                "caching_sha2 auth data",
                            ),
                        })
                    }
                },
                _ => {
                    return Err(BackendError::Protocol {
                        addr: self.addr.to_string(),
                        source: sextant_protocol::ProtoError::Malformed("login reply"),
                    })
                }
            }
        }
    }

    /// A login that needs the password itself where sextant will not
    /// send it: neither TLS with a verified certificate nor a pinned key
    /// (whoever answers at the address could offer a key of its own).
    fn needs_secure(&self, p: &ConnectParams<'_>, plugin: &str) -> BackendError {
        BackendError::Auth {
            addr: self.addr.to_string(),
            user: p.user.to_string(),
            code: 2061,
            message: format!(
                "Authentication requires secure connection: the server asks for the password \
                 itself ({plugin}), which sextant sends only over TLS whose certificate it \
                 verifies (tls and tls_ca) or encrypted with the server's public key pinned \
                 in config (server_public_key), never to a key the server offers"
            ),
        }
    }

    /// The password encrypted with the server's RSA public key (`pem`), as
    /// sha256_password and caching_sha2_password's full authentication
    /// send it without TLS.
    pub(super) fn rsa_password(
        &self,
        pem: &[u8],
        password: &str,
        nonce: &[u8],
    ) -> Result<Vec<u8>, BackendError> {
        sextant_net::tls::sha2_rsa_encrypt(pem, password.as_bytes(), nonce).map_err(|e| {
            BackendError::Tls {
                addr: self.addr.to_string(),
                reason: e.to_string(),
            }
        })
    }
}

pub(super) fn nul_terminated(password: &str) -> Vec<u8> {
    let mut v = password.as_bytes().to_vec();
    v.push(0);
    v
}

pub(super) fn scramble(plugin: &str, password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if plugin == CACHING_SHA2_PASSWORD {
        auth::sha2_scramble(password, nonce)
    } else {
        auth::native_scramble(password, nonce)
    }
}
