//! The connection phase as the server clients see: greeting, login with
//! mysql_native_password or caching_sha2_password, and COM_CHANGE_USER.

use crate::client::Client;
use crate::errors::SessionError;
use rand::Rng;
use sextant_protocol::auth;
use sextant_protocol::codec::{write_packet, Reader};
use sextant_protocol::consts::{cap, status, CACHING_SHA2_PASSWORD, NATIVE_PASSWORD};
use sextant_protocol::handshake::{
    encode_auth_switch, is_ssl_request, HandshakeResponse, InitialHandshake,
};
use sextant_protocol::packets::write_simple_ok;

/// What sextant offers clients. Not offered: compression, SSL (until TLS is
/// configured), query attributes and optional metadata (they change packet
/// formats in ways the servers behind may not share).
pub const SERVER_CAPS: u32 = cap::LONG_PASSWORD
    | cap::FOUND_ROWS
    | cap::LONG_FLAG
    | cap::CONNECT_WITH_DB
    | cap::LOCAL_FILES
    | cap::IGNORE_SPACE
    | cap::PROTOCOL_41
    | cap::INTERACTIVE
    | cap::TRANSACTIONS
    | cap::SECURE_CONNECTION
    | cap::MULTI_STATEMENTS
    | cap::MULTI_RESULTS
    | cap::PS_MULTI_RESULTS
    | cap::PLUGIN_AUTH
    | cap::CONNECT_ATTRS
    | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | cap::SESSION_TRACK
    | cap::DEPRECATE_EOF;

/// utf8mb4_general_ci: the greeting's default collation.
pub const DEFAULT_CHARSET: u8 = 45;

pub fn new_nonce() -> [u8; 20] {
    // Printable, never NUL: some clients treat the nonce as a C string.
    let mut rng = rand::thread_rng();
    let mut n = [0u8; 20];
    for b in &mut n {
        *b = rng.gen_range(0x21..0x7f);
    }
    n
}

pub struct Login {
    pub user: String,
    pub caps: u32,
    pub charset: u8,
    pub database: Option<String>,
    pub nonce: [u8; 20],
    /// Sequence id for the next packet sextant sends (the final OK).
    pub seq: u8,
}

/// Looks up a user's clear password.
pub trait Users {
    fn password(&self, user: &str) -> Option<&str>;
}

/// Runs the greeting and login; on success the caller sends the final OK
/// (after checking the database, if one was named).
pub async fn login(
    client: &mut Client,
    users: &impl Users,
    server_version: &str,
    connection_id: u32,
) -> Result<Login, SessionError> {
    let nonce = new_nonce();
    let hs = InitialHandshake {
        server_version: server_version.to_string(),
        connection_id,
        nonce: nonce.to_vec(),
        capabilities: SERVER_CAPS,
        charset: DEFAULT_CHARSET,
        status: status::AUTOCOMMIT,
        auth_plugin: NATIVE_PASSWORD.into(),
    };
    let mut p = Vec::with_capacity(128);
    hs.encode(&mut p);
    write_packet(&mut client.out, 0, &p);
    client.flush().await?;

    let mut payload = Vec::new();
    let seq = client.read_packet(&mut payload).await?;
    if is_ssl_request(&payload) {
        return Err(SessionError::Handshake(
            "the client asked for TLS, which is not configured on this sextant listener".into(),
        ));
    }
    let resp = HandshakeResponse::parse(&payload).map_err(SessionError::Malformed)?;
    let caps = resp.capabilities & (SERVER_CAPS | cap::SSL);
    let mut seq = seq.wrapping_add(1);
    let plugin = resp.auth_plugin.as_deref().unwrap_or(NATIVE_PASSWORD);
    let host = client_host(client);
    let denied = |using_password| SessionError::AccessDenied {
        user: resp.user.clone(),
        host: host.clone(),
        using_password,
    };
    let Some(password) = users.password(&resp.user) else {
        return Err(denied(!resp.auth_response.is_empty()));
    };
    let ok = match plugin {
        NATIVE_PASSWORD => check_native(password, &nonce, &resp.auth_response),
        CACHING_SHA2_PASSWORD => {
            let good = if password.is_empty() {
                resp.auth_response.is_empty()
            } else {
                auth::verify_sha2(password.as_bytes(), &nonce, &resp.auth_response)
            };
            if good {
                // "fast authentication succeeded"; the OK follows.
                write_packet(&mut client.out, seq, &[0x01, 0x03]);
                seq = seq.wrapping_add(1);
            }
            good
        }
        _ => {
            // Any other plugin: ask the client to switch to native.
            let mut sw = Vec::new();
            encode_auth_switch(&mut sw, NATIVE_PASSWORD, &nonce);
            write_packet(&mut client.out, seq, &sw);
            client.flush().await?;
            let s = client.read_packet(&mut payload).await?;
            seq = s.wrapping_add(1);
            check_native(password, &nonce, &payload)
        }
    };
    if !ok {
        return Err(denied(!resp.auth_response.is_empty()));
    }
    Ok(Login {
        user: resp.user,
        caps,
        charset: resp.charset,
        database: resp.database,
        nonce,
        seq,
    })
}

fn check_native(password: &str, nonce: &[u8], response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty();
    }
    auth::verify_native(password.as_bytes(), nonce, response)
}

pub fn client_host(c: &Client) -> String {
    c.peer.ip().to_string()
}

pub fn send_ok(client: &mut Client, seq: u8) {
    write_simple_ok(&mut client.out, seq, status::AUTOCOMMIT);
}

/// A parsed COM_CHANGE_USER.
pub struct ChangeUser {
    pub user: String,
    pub auth_response: Vec<u8>,
    pub database: Option<String>,
    pub charset: Option<u8>,
    pub plugin: Option<String>,
}

pub fn parse_change_user(payload: &[u8], caps: u32) -> Result<ChangeUser, SessionError> {
    let mut r = Reader::new(payload);
    let m = SessionError::Malformed;
    r.u8("command").map_err(m)?;
    let user = String::from_utf8_lossy(r.nul_bytes("user").map_err(m)?).into_owned();
    let auth_response = if caps & cap::SECURE_CONNECTION != 0 {
        let n = r.u8("auth length").map_err(m)? as usize;
        r.bytes(n, "auth response").map_err(m)?.to_vec()
    } else {
        r.nul_bytes("auth response").map_err(m)?.to_vec()
    };
    let db = r.nul_or_eof_bytes();
    let database = (!db.is_empty()).then(|| String::from_utf8_lossy(db).into_owned());
    let mut charset = None;
    if r.remaining() >= 2 {
        charset = Some(r.u16("charset").map_err(m)? as u8);
    }
    let mut plugin = None;
    if caps & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
        plugin = Some(String::from_utf8_lossy(r.nul_or_eof_bytes()).into_owned());
    }
    Ok(ChangeUser {
        user,
        auth_response,
        database,
        charset,
        plugin,
    })
}

/// Checks a COM_CHANGE_USER answer against the connection's nonce.
pub fn check_change_user(cu: &ChangeUser, password: &str, nonce: &[u8]) -> bool {
    match cu.plugin.as_deref() {
        Some(CACHING_SHA2_PASSWORD) => {
            if password.is_empty() {
                cu.auth_response.is_empty()
            } else {
                auth::verify_sha2(password.as_bytes(), nonce, &cu.auth_response)
            }
        }
        _ => check_native(password, nonce, &cu.auth_response),
    }
}
