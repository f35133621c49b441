//! `[proxy]`: listeners, client limits, logins and TLS to clients.

use crate::check::Checker;
use crate::Addr;
use crate::Config;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proxy {
    #[serde(default = "default_listen")]
    pub listen: Addr,
    /// Worker threads; 0 = one per core.
    #[serde(default)]
    pub threads: usize,
    /// Client connections beyond this are refused with ER_CON_COUNT_ERROR.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Largest client packet accepted (bytes); larger ones get
    /// ER_NET_PACKET_TOO_LARGE and the connection is closed.
    #[serde(default = "default_max_allowed_packet")]
    pub max_allowed_packet: usize,
    /// Most memory all client sessions together may hold for statements
    /// they are reading (packets over 1 MiB count); one that would pass it
    /// is refused with 1041 (out of resources) and its session closed, so
    /// many large statements at once cannot exhaust memory.
    #[serde(default = "default_statement_memory_mb")]
    pub statement_memory_mb: usize,
    /// A client that has not finished its handshake by then is dropped.
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// Count statements by digest (SHOW QUERY DIGESTS): a lexer pass and
    /// a table look-up per statement.
    #[serde(default = "crate::yes")]
    pub query_digests: bool,
    /// Digests each worker thread keeps; statements of further digests
    /// are counted together (memory stays bounded).
    #[serde(default = "default_query_digests_max")]
    pub query_digests_max: usize,
    /// At SIGTERM/SIGINT, how long running statements and open
    /// transactions may take to finish before sextant exits anyway.
    #[serde(default = "default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,
    /// At SIGTERM/SIGINT, how long /readyz answers 503 while new clients
    /// are still accepted and served, before the shutdown above begins:
    /// behind a load balancer, at least its health-check interval times
    /// the failures it needs, so that it stops sending clients first.
    /// 0: the shutdown begins at once.
    #[serde(default)]
    pub drain_delay_ms: u64,
    /// Failed logins in a row from one address before it is locked out
    /// (every login from it refused with 1129, as MySQL's
    /// max_connect_errors does) for `failed_login_lockout_ms`. A successful
    /// login starts the count again. 0: no limit.
    #[serde(default = "default_max_failed_logins")]
    pub max_failed_logins: u32,
    #[serde(default = "default_failed_login_lockout_ms")]
    pub failed_login_lockout_ms: u64,
    /// A session idle inside a transaction for longer is ended: its
    /// transaction rolled back, its server connection closed, and the
    /// client told why (4031). 0: never. It frees the server connection
    /// that an abandoned transaction holds.
    #[serde(default)]
    pub idle_in_transaction_timeout_ms: u64,
    /// Transaction replay: the most a session's record of its open
    /// transaction (its statements' text) may hold; a larger transaction
    /// is not replayed when its server connection is lost. 0: replay off.
    #[serde(default = "default_replay_max_bytes")]
    pub replay_max_bytes: usize,
    /// The most all sessions' records together may hold.
    #[serde(default = "default_replay_max_total_bytes")]
    pub replay_max_total_bytes: usize,
    /// Prepared statements one client session may hold; more get 1461, as
    /// from a server at its max_prepared_stmt_count (whose default this is).
    #[serde(default = "default_max_prepared_statements")]
    pub max_prepared_statements: usize,
    /// Version string shown to clients; default: the primary's own.
    #[serde(default)]
    pub server_version: Option<String>,
    /// Group used by users that name none; default: the only group.
    #[serde(default)]
    pub default_group: Option<String>,
    /// PEM certificate chain and private key for TLS to clients. Without
    /// them sextant offers TLS with a self-signed certificate it makes at
    /// start (unless `tls_self_signed = false`).
    #[serde(default)]
    pub tls_cert: Option<String>,
    #[serde(default)]
    pub tls_key: Option<String>,
    #[serde(default = "crate::default_true")]
    pub tls_self_signed: bool,
    /// Refuse clients that did not switch to TLS.
    #[serde(default)]
    pub require_tls: bool,
    /// The auth plugin sextant's greeting announces to clients.
    #[serde(default)]
    pub auth_plugin: AuthPlugin,
    /// When caching_sha2_password clients must send their password in full
    /// (over TLS, or RSA-encrypted) instead of the scramble alone: "never"
    /// (sextant knows the passwords, so the scramble is proof enough),
    /// "first" (MySQL's behaviour: once per user after start) or "always".
    #[serde(default)]
    pub sha2_full_auth: FullAuth,
    /// PEM RSA private key for caching_sha2_password's key exchange without
    /// TLS; default: a key generated at start-up when full auth is enabled.
    #[serde(default)]
    pub rsa_key: Option<String>,
    /// Networks of load balancers that put a PROXY protocol header (v1 or
    /// v2) before each client connection ("10.0.0.0/8", or an address).
    /// Connections from them must send one, and sextant then sees the
    /// client it names; anyone else who sends one is refused.
    #[serde(default)]
    pub proxy_protocol_from: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum AuthPlugin {
    #[default]
    #[serde(rename = "mysql_native_password")]
    NativePassword,
    #[serde(rename = "caching_sha2_password")]
    CachingSha2Password,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FullAuth {
    #[default]
    Never,
    First,
    Always,
}

impl Default for Proxy {
    fn default() -> Self {
        Proxy {
            listen: default_listen(),
            threads: 0,
            max_connections: default_max_connections(),
            max_allowed_packet: default_max_allowed_packet(),
            statement_memory_mb: default_statement_memory_mb(),
            handshake_timeout_ms: default_handshake_timeout_ms(),
            shutdown_timeout_ms: default_shutdown_timeout_ms(),
            drain_delay_ms: 0,
            query_digests: true,
            query_digests_max: default_query_digests_max(),
            max_failed_logins: default_max_failed_logins(),
            failed_login_lockout_ms: default_failed_login_lockout_ms(),
            max_prepared_statements: default_max_prepared_statements(),
            idle_in_transaction_timeout_ms: 0,
            replay_max_bytes: default_replay_max_bytes(),
            replay_max_total_bytes: default_replay_max_total_bytes(),
            server_version: None,
            default_group: None,
            tls_cert: None,
            tls_key: None,
            tls_self_signed: true,
            require_tls: false,
            auth_plugin: AuthPlugin::default(),
            sha2_full_auth: FullAuth::default(),
            rsa_key: None,
            proxy_protocol_from: Vec::new(),
        }
    }
}

pub(crate) fn default_listen() -> Addr {
    Addr("127.0.0.1:6033".into())
}

pub(crate) fn default_max_connections() -> usize {
    20_000
}

pub(crate) fn default_max_allowed_packet() -> usize {
    64 << 20
}

pub(crate) fn default_statement_memory_mb() -> usize {
    512
}

pub(crate) fn default_max_prepared_statements() -> usize {
    16_382
}

pub(crate) fn default_query_digests_max() -> usize {
    2_000
}

pub(crate) fn default_shutdown_timeout_ms() -> u64 {
    30_000
}

pub(crate) fn default_handshake_timeout_ms() -> u64 {
    10_000
}

pub(crate) fn default_max_failed_logins() -> u32 {
    100
}

pub(crate) fn default_failed_login_lockout_ms() -> u64 {
    60_000
}

impl Proxy {
    pub(crate) fn check(&self, cfg: &Config, c: &mut Checker) {
        if let Some(g) = &self.default_group {
            if !cfg.groups.contains_key(g) {
                c.err(
                    "proxy",
                    "default_group",
                    format!("group {g:?} is not defined"),
                );
            }
        } else if cfg.groups.len() > 1 {
            c.err(
                "proxy",
                "default_group",
                "several groups are defined, so [proxy] default_group must say which one users get"
                    .into(),
            );
        }
        let listens: Vec<(&str, &str, &Addr)> = std::iter::once(("proxy", "listen", &self.listen))
            .chain(cfg.admin.iter().map(|a| ("admin", "listen", &a.listen)))
            .chain(
                cfg.admin
                    .iter()
                    .filter_map(|a| Some(("admin", "http_listen", a.http_listen.as_ref()?))),
            )
            .collect();
        for (i, (table, key, a)) in listens.iter().enumerate() {
            if let Some((t0, k0, _)) = listens[..i].iter().find(|(_, _, b)| b == a) {
                c.err(
                    table,
                    key,
                    format!("{a} is also [{t0}] {k0}; give each listener its own address"),
                );
            }
        }
        let listens: Vec<(&str, &Addr)> = listens.iter().map(|(t, _, a)| (*t, *a)).collect();
        for (table, a) in listens {
            if a.is_unix_path() {
                c.err(
                    table,
                    "listen",
                    format!("{a}: sextant listens on TCP only; give \"host:port\""),
                );
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => c.err(
                "proxy",
                "tls_cert",
                "tls_cert is set but tls_key is not; give both".into(),
            ),
            (None, Some(_)) => c.err(
                "proxy",
                "tls_key",
                "tls_key is set but tls_cert is not; give both".into(),
            ),
            _ => {}
        }
        let tls = self.tls_cert.is_some();
        if self.require_tls && !tls {
            c.err(
                "proxy",
                "require_tls",
                "require_tls needs tls_cert and tls_key".into(),
            );
        }
        for n in &self.proxy_protocol_from {
            if parse_network(n).is_none() {
                c.err(
                    "proxy",
                    "proxy_protocol_from",
                    format!("{n:?} is not a network: give an address and prefix length, such as \"10.0.0.0/8\", or one address"),
                );
            }
        }
        if self.max_allowed_packet < 1024 {
            c.err(
                "proxy",
                "max_allowed_packet",
                "must be at least 1024 bytes".into(),
            );
        }
        if self.statement_memory_mb == 0 {
            c.err(
                "proxy",
                "statement_memory_mb",
                "must be at least 1 (MB)".into(),
            );
        }
    }
}

/// A network as `proxy_protocol_from` gives it: "10.0.0.0/8",
/// "2001:db8::/32", or one address.
pub fn parse_network(s: &str) -> Option<ipnet::IpNet> {
    s.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))
}

fn default_replay_max_bytes() -> usize {
    1 << 20
}

fn default_replay_max_total_bytes() -> usize {
    256 << 20
}
