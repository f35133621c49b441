//! The connection phase as the server clients see: greeting, login with
//! mysql_native_password or caching_sha2_password, and COM_CHANGE_USER.

use crate::client::Client;
use crate::errors::{SessionError, StartError};
use parking_lot::Mutex;
use rand::Rng;
use sextant_config::Config;
use sextant_config::FullAuth;
use sextant_net::tls::RsaKeys;
use sextant_protocol::auth;
use sextant_protocol::codec::{write_packet, Reader};
use sextant_protocol::consts::{cap, status, CACHING_SHA2_PASSWORD, ED25519, NATIVE_PASSWORD};
use sextant_protocol::handshake::{
    encode_auth_switch, is_ssl_request, HandshakeResponse, InitialHandshake,
};
use sextant_protocol::packets::write_simple_ok;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    | cap::DEPRECATE_EOF
    | cap::COMPRESS;

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
    /// MariaDB extended capabilities both sides have.
    pub mariadb_caps: u32,
    /// The zstd level asked for (with CLIENT_ZSTD_COMPRESSION_ALGORITHM).
    pub zstd_level: u8,
    pub database: Option<String>,
    pub nonce: [u8; 20],
    /// Sequence id for the next packet sextant sends (the final OK).
    pub seq: u8,
}

/// Looks up a user's clear password and TLS requirement.
pub trait Users {
    fn password(&self, user: &str) -> Option<&str>;
    fn require_tls(&self, user: &str) -> bool;
    /// The user logs in with client_ed25519.
    fn ed25519(&self, _user: &str) -> bool {
        false
    }
}

/// How clients log in: TLS, the announced plugin, caching_sha2 policy.
pub struct AuthSetup {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub require_tls: bool,
    pub plugin: &'static str,
    pub full_auth: FullAuth,
    pub rsa: Option<Arc<RsaKeys>>,
    /// Users that passed caching_sha2 full authentication since start (the
    /// "first" policy asks for it once per user, as MySQL does).
    pub sha2_cache: Mutex<HashSet<String>>,
    /// Failed logins by source address (kept across reloads that do not
    /// change its settings).
    pub guard: Arc<LoginGuard>,
}

/// Failed logins in a row per source address, and the addresses locked
/// out. Touched only at login, never per statement.
pub struct LoginGuard {
    max_failures: u32,
    lockout: Duration,
    by_addr: Mutex<HashMap<IpAddr, Failures>>,
}

struct Failures {
    count: u32,
    locked_until: Option<Instant>,
}

/// Addresses remembered at most; beyond that the ones not locked are
/// forgotten (an attacker with many addresses must not grow the map).
const GUARD_MAX_ADDRS: usize = 100_000;

impl LoginGuard {
    pub fn new(max_failures: u32, lockout: Duration) -> LoginGuard {
        LoginGuard {
            max_failures,
            lockout,
            by_addr: Mutex::new(HashMap::new()),
        }
    }

    pub fn same_settings(&self, max_failures: u32, lockout: Duration) -> bool {
        self.max_failures == max_failures && self.lockout == lockout
    }

    /// Whether logins from `addr` are refused now.
    pub fn locked(&self, addr: IpAddr) -> bool {
        if self.max_failures == 0 {
            return false;
        }
        let mut m = self.by_addr.lock();
        match m.get_mut(&addr).and_then(|f| f.locked_until) {
            Some(t) if t > Instant::now() => true,
            Some(_) => {
                m.remove(&addr);
                false
            }
            None => false,
        }
    }

    /// Counts a failed login; true when it locked the address out.
    pub fn failed(&self, addr: IpAddr) -> bool {
        if self.max_failures == 0 {
            return false;
        }
        let mut m = self.by_addr.lock();
        if m.len() >= GUARD_MAX_ADDRS && !m.contains_key(&addr) {
            m.retain(|_, f| f.locked_until.is_some());
        }
        let f = m.entry(addr).or_insert(Failures {
            count: 0,
            locked_until: None,
        });
        f.count += 1;
        if f.count >= self.max_failures && f.locked_until.is_none() {
            f.locked_until = Some(Instant::now() + self.lockout);
            return true;
        }
        false
    }

    pub fn succeeded(&self, addr: IpAddr) {
        if self.max_failures > 0 {
            self.by_addr.lock().remove(&addr);
        }
    }
}

/// What an unknown user's login is checked against, so that it takes as
/// long as a known user's wrong password and cannot be told apart.
fn decoy_password() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| {
        let mut rng = rand::thread_rng();
        (0..24)
            .map(|_| rng.gen_range(b'a'..=b'z') as char)
            .collect()
    })
}

impl AuthSetup {
    pub fn plain() -> Self {
        AuthSetup {
            tls: None,
            require_tls: false,
            plugin: NATIVE_PASSWORD,
            full_auth: FullAuth::Never,
            rsa: None,
            sha2_cache: Mutex::new(HashSet::new()),
            guard: Arc::new(LoginGuard::new(0, Duration::ZERO)),
        }
    }
}

/// Runs the greeting and login; on success the caller sends the final OK
/// (after checking the database, if one was named).
pub async fn login(
    client: &mut Client,
    users: &impl Users,
    auth: &AuthSetup,
    server_version: &str,
    connection_id: u32,
) -> Result<Login, SessionError> {
    let addr = client.peer.ip();
    if auth.guard.locked(addr) {
        // The error comes instead of the greeting, with its sequence id
        // (0), as MySQL sends it to a blocked host; callers answer after
        // the last packet seen.
        client.last_seq = u8::MAX;
        return Err(SessionError::HostBlocked(client_host(client)));
    }
    let r = login_checked(client, users, auth, server_version, connection_id).await;
    match &r {
        Ok(_) => auth.guard.succeeded(addr),
        Err(SessionError::AccessDenied { .. }) => {
            if auth.guard.failed(addr) {
                tracing::warn!(
                    peer = %client.peer,
                    lockout_ms = auth.guard.lockout.as_millis() as u64,
                    "too many failed logins from this address: locked out"
                );
            }
        }
        Err(_) => {}
    }
    r
}

async fn login_checked(
    client: &mut Client,
    users: &impl Users,
    auth: &AuthSetup,
    server_version: &str,
    connection_id: u32,
) -> Result<Login, SessionError> {
    let nonce = new_nonce();
    let mut caps_offered = SERVER_CAPS;
    if auth.tls.is_some() {
        caps_offered |= cap::SSL;
    }
    // In front of MariaDB, sextant offers what a MariaDB server would of the
    // extended capabilities it can relay (announced by leaving out
    // CLIENT_MYSQL).
    let mariadb_offered = match server_version.contains("MariaDB") {
        true => sextant_backend::FLAVOR_MARIADB_CAPS,
        false => 0,
    };
    if mariadb_offered != 0 {
        caps_offered &= !cap::LONG_PASSWORD;
    } else {
        // MySQL 8's own: zstd, result sets without metadata when the client
        // sets resultset_metadata = NONE (relayed as they come), and query
        // attributes (passed on with each statement).
        caps_offered |=
            cap::ZSTD_COMPRESSION | cap::OPTIONAL_RESULTSET_METADATA | cap::QUERY_ATTRIBUTES;
    }
    let hs = InitialHandshake {
        server_version: server_version.to_string(),
        connection_id,
        nonce: nonce.to_vec(),
        capabilities: caps_offered,
        charset: DEFAULT_CHARSET,
        status: status::AUTOCOMMIT,
        auth_plugin: auth.plugin.into(),
        mariadb_caps: mariadb_offered,
    };
    let mut p = Vec::with_capacity(128);
    hs.encode(&mut p);
    write_packet(&mut client.out, 0, &p);
    client.flush().await?;

    let mut payload = Vec::new();
    client.read_first_packet(&mut payload).await?;
    if is_ssl_request(&payload) {
        let Some(cfg) = &auth.tls else {
            return Err(SessionError::Handshake(
                "the client asked for TLS, which is not configured on this sextant listener".into(),
            ));
        };
        client.start_tls(cfg.clone()).await?;
        client.read_packet(&mut payload).await?;
    }
    let resp = HandshakeResponse::parse(&payload).map_err(SessionError::Malformed)?;
    let tls = client.stream.is_tls();
    if !tls && (auth.require_tls || users.require_tls(&resp.user)) {
        return Err(SessionError::InsecureTransport(resp.user));
    }
    let caps = resp.capabilities & caps_offered;
    let mariadb_caps = resp.mariadb_caps & mariadb_offered;
    let mut seq = client.last_seq.wrapping_add(1);
    let checked = authenticate(
        client,
        users,
        auth,
        Credentials {
            user: &resp.user,
            plugin: resp.auth_plugin.as_deref(),
            response: &resp.auth_response,
            nonce: &nonce,
        },
        &mut seq,
    )
    .await?;
    if !checked.ok {
        return Err(SessionError::AccessDenied {
            user: resp.user.clone(),
            host: client_host(client),
            using_password: checked.using_password,
        });
    }
    Ok(Login::new(resp, caps, mariadb_caps, nonce, seq))
}

/// What a client sent to prove who it is: at login, or in COM_CHANGE_USER.
pub struct Credentials<'a> {
    pub user: &'a str,
    /// The plugin the client used (None: mysql_native_password).
    pub plugin: Option<&'a str>,
    pub response: &'a [u8],
    /// The scramble the client was given (the greeting's).
    pub nonce: &'a [u8; 20],
}

/// Whether credentials check out, and whether a password was given.
pub struct Checked {
    pub ok: bool,
    pub using_password: bool,
}

/// Checks `c` for a configured user as the server would, switching the
/// client to the plugin the user needs first (client_ed25519 for a user
/// configured so; mysql_native_password for one known by its hash; the
/// listener's plugin for any other the client chose), and running
/// caching_sha2_password's exchange. `seq`: the next sequence id sextant
/// sends, kept up to date. An unknown user goes through every step a known
/// one does, against a password nobody knows, and is refused.
pub async fn authenticate(
    client: &mut Client,
    users: &impl Users,
    auth: &AuthSetup,
    c: Credentials<'_>,
    seq: &mut u8,
) -> Result<Checked, SessionError> {
    let known = users.password(c.user);
    let password: &str = match known {
        Some(p) => p,
        None => decoy_password(),
    };
    let mut payload = Vec::new();
    if known.is_some() && users.ed25519(c.user) {
        // As MariaDB's server: a switch to client_ed25519 with a fresh
        // 32-byte nonce (exactly 32 bytes, no terminating zero).
        let mut nonce32: [u8; 32] = rand::random();
        // Go's driver drops a trailing zero byte of auth-switch data, and
        // then refuses a 31-byte nonce (1 login in 256 against MariaDB).
        if nonce32[31] == 0 {
            nonce32[31] = 1 + (nonce32[0] % 255);
        }
        let mut sw = Vec::with_capacity(48);
        sw.push(0xfe);
        sw.extend_from_slice(ED25519.as_bytes());
        sw.push(0);
        sw.extend_from_slice(&nonce32);
        write_packet(&mut client.out, *seq, &sw);
        client.flush().await?;
        client.read_packet(&mut payload).await?;
        *seq = client.last_seq.wrapping_add(1);
        return Ok(Checked {
            ok: auth::verify_ed25519(password.as_bytes(), &nonce32, &payload),
            using_password: !payload.is_empty(),
        });
    }
    let mut plugin = c.plugin.unwrap_or(NATIVE_PASSWORD);
    let mut response = c.response;
    // A user known by a mysql_native_password hash can only be checked
    // with that plugin.
    let hashed = known.is_some_and(sextant_config::is_native_hash);
    let wanted = if hashed { NATIVE_PASSWORD } else { auth.plugin };
    if plugin != NATIVE_PASSWORD && (plugin != CACHING_SHA2_PASSWORD || hashed) {
        // Any other plugin: ask the client to switch to ours.
        let mut sw = Vec::new();
        encode_auth_switch(&mut sw, wanted, c.nonce);
        write_packet(&mut client.out, *seq, &sw);
        client.flush().await?;
        client.read_packet(&mut payload).await?;
        *seq = client.last_seq.wrapping_add(1);
        plugin = wanted;
        response = &payload;
    }
    let ok = if plugin == CACHING_SHA2_PASSWORD {
        sha2_login(client, auth, c.user, password, c.nonce, response, seq).await?
    } else {
        check_native(password, c.nonce, response)
    };
    Ok(Checked {
        ok: ok && known.is_some(),
        using_password: !response.is_empty(),
    })
}

impl Login {
    fn new(
        resp: HandshakeResponse,
        caps: u32,
        mariadb_caps: u32,
        nonce: [u8; 20],
        seq: u8,
    ) -> Login {
        Login {
            user: resp.user,
            caps,
            charset: resp.charset,
            mariadb_caps,
            zstd_level: resp.zstd_level,
            database: resp.database,
            nonce,
            seq,
        }
    }
}

/// caching_sha2_password: the scramble, then (by policy) the password
/// itself, in clear over TLS or RSA-encrypted with sextant's key.
async fn sha2_login(
    client: &mut Client,
    auth: &AuthSetup,
    user: &str,
    password: &str,
    nonce: &[u8],
    response: &[u8],
    seq: &mut u8,
) -> Result<bool, SessionError> {
    let fast_ok = if password.is_empty() {
        response.is_empty()
    } else {
        auth::verify_sha2(password.as_bytes(), nonce, response)
    };
    if !fast_ok {
        return Ok(false);
    }
    let full = !password.is_empty()
        && match auth.full_auth {
            FullAuth::Never => false,
            FullAuth::Always => true,
            FullAuth::First => !auth.sha2_cache.lock().contains(user),
        };
    if !full {
        // "fast authentication succeeded"; the OK follows.
        write_packet(&mut client.out, *seq, &[0x01, 0x03]);
        *seq = seq.wrapping_add(1);
        return Ok(true);
    }
    // "perform full authentication"
    write_packet(&mut client.out, *seq, &[0x01, 0x04]);
    client.flush().await?;
    let mut p = Vec::new();
    client.read_packet(&mut p).await?;
    let given: Vec<u8> = if client.stream.is_tls() {
        p.strip_suffix(&[0]).unwrap_or(&p).to_vec()
    } else {
        let Some(rsa) = &auth.rsa else {
            return Err(SessionError::Handshake(
                "caching_sha2_password full authentication without TLS needs an RSA key, and none is configured".into(),
            ));
        };
        if p == [0x02] {
            let mut key = vec![0x01];
            key.extend_from_slice(rsa.public_pem.as_bytes());
            write_packet(&mut client.out, client.last_seq.wrapping_add(1), &key);
            client.flush().await?;
            client.read_packet(&mut p).await?;
        }
        rsa.decrypt_password(&p, nonce).unwrap_or_default()
    };
    *seq = client.last_seq.wrapping_add(1);
    let ok = auth::ct_eq(&given, password.as_bytes());
    if ok {
        auth.sha2_cache.lock().insert(user.to_string());
    }
    Ok(ok)
}

fn check_native(password: &str, nonce: &[u8], response: &[u8]) -> bool {
    if sextant_config::is_native_hash(password) {
        return auth::verify_native_hash(password, nonce, response);
    }
    if password.is_empty() {
        return response.is_empty();
    }
    auth::verify_native(password.as_bytes(), nonce, response)
}

/// The compressed protocol starts after the login's OK, if negotiated
/// (zlib when a client offers both, as servers choose).
pub fn start_compression(client: &mut Client, login: &Login) {
    use sextant_protocol::compress::Algorithm;
    if login.caps & cap::COMPRESS != 0 {
        client.start_compression(Algorithm::Zlib);
    } else if login.caps & cap::ZSTD_COMPRESSION != 0 {
        let level = match login.zstd_level {
            0 => 3,
            l => l as i32,
        };
        client.start_compression(Algorithm::Zstd(level));
    }
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

/// How clients log in under `config`. With the `previous` set-up (a
/// reload), what was made at start rather than read from a file (a
/// self-signed certificate, a generated RSA key) and the failed-login
/// counts are kept; certificate and key files are read again, so a reload
/// picks up renewed certificates.
pub(crate) fn build_auth(
    config: &Config,
    previous: Option<(&AuthSetup, &Config)>,
) -> Result<AuthSetup, StartError> {
    let p = &config.proxy;
    let prev_proxy = previous.map(|(a, c)| (a, &c.proxy));
    let tls = match (&p.tls_cert, &p.tls_key) {
        (Some(cert), Some(key)) => Some(sextant_net::tls::server_config(cert, key).map_err(
            |e| StartError::Tls {
                what: "[proxy] tls_cert / tls_key".into(),
                source: e,
            },
        )?),
        _ if p.tls_self_signed
            && prev_proxy.is_some_and(|(a, pp)| {
                a.tls.is_some() && pp.tls_self_signed && pp.tls_cert.is_none()
            }) =>
        {
            prev_proxy.and_then(|(a, _)| a.tls.clone())
        }
        _ if p.tls_self_signed => {
            tracing::info!("TLS to clients with a self-signed certificate made at start (set [proxy] tls_cert and tls_key for clients that verify it)");
            Some(
                sextant_net::tls::self_signed_server_config().map_err(|e| StartError::Tls {
                    what: "a self-signed certificate".into(),
                    source: e,
                })?,
            )
        }
        _ => None,
    };
    let plugin = match p.auth_plugin {
        sextant_config::AuthPlugin::NativePassword => sextant_protocol::consts::NATIVE_PASSWORD,
        sextant_config::AuthPlugin::CachingSha2Password => {
            sextant_protocol::consts::CACHING_SHA2_PASSWORD
        }
    };
    let rsa = match (&p.rsa_key, p.sha2_full_auth) {
        (Some(path), _) => {
            let what = || "[proxy] rsa_key".to_string();
            let pem = std::fs::read_to_string(path).map_err(|e| StartError::Tls {
                what: what(),
                source: sextant_net::NetError::Read {
                    what: "RSA key file",
                    path: path.clone(),
                    source: e,
                },
            })?;
            Some(Arc::new(
                sextant_net::tls::RsaKeys::from_pem(&pem).map_err(|e| StartError::Tls {
                    what: what(),
                    source: e,
                })?,
            ))
        }
        (None, sextant_config::FullAuth::Never) => None,
        (None, _) if prev_proxy.is_some_and(|(a, pp)| a.rsa.is_some() && pp.rsa_key.is_none()) => {
            prev_proxy.and_then(|(a, _)| a.rsa.clone())
        }
        (None, _) => {
            tracing::info!("generating a 2048-bit RSA key for caching_sha2_password (set [proxy] rsa_key to use your own)");
            Some(Arc::new(
                sextant_net::tls::RsaKeys::generate(2048).map_err(|e| StartError::Tls {
                    what: "generating an RSA key".into(),
                    source: e,
                })?,
            ))
        }
    };
    Ok(AuthSetup {
        tls,
        require_tls: p.require_tls,
        plugin,
        full_auth: p.sha2_full_auth,
        rsa,
        sha2_cache: Default::default(),
        guard: match previous {
            Some((a, _))
                if a.guard.same_settings(
                    p.max_failed_logins,
                    Duration::from_millis(p.failed_login_lockout_ms),
                ) =>
            {
                a.guard.clone()
            }
            _ => Arc::new(guard(p)),
        },
    })
}

pub(crate) fn guard(p: &sextant_config::Proxy) -> LoginGuard {
    LoginGuard::new(
        p.max_failed_logins,
        std::time::Duration::from_millis(p.failed_login_lockout_ms),
    )
}
