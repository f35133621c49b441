//! The configuration file. Every key has a default that suits most users;
//! an unknown key is an error (typo protection), and every error names the
//! file, the line and the key, and says what was expected.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}{}: {key}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        path: String,
        line: Option<usize>,
        key: String,
        message: String,
    },
    /// Several problems, one per line.
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Several(Vec<ConfigError>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub proxy: Proxy,
    #[serde(default)]
    pub admin: Option<Admin>,
    #[serde(default)]
    pub users: Vec<User>,
    #[serde(default)]
    pub groups: BTreeMap<String, Group>,
    #[serde(default)]
    pub routing: Routing,
    #[serde(default)]
    pub monitor: Monitor,
    #[serde(default)]
    pub sharding: Option<Sharding>,
    #[serde(default)]
    pub xa: Xa,
    #[serde(default)]
    pub log: Log,
    /// The sharding layout `[sharding]` describes, read and checked with
    /// the rest.
    #[serde(skip)]
    pub layout: Option<sextant_sharding::Layout>,
}

/// `[sharding]`: which group holds which rows. Either Cetus's own file
/// (`cetus_file`, a sharding.json or part.json, read as it is), or the same
/// keys written here: `[[sharding.vdb]]`, `[[sharding.table]]`,
/// `[[sharding.single_tables]]`, `[sharding.default]`, `[sharding.all]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sharding {
    #[serde(default)]
    pub cetus_file: Option<String>,
    /// Where tables that no vdb, single table or `all` list names live:
    /// "default_group" (their database's `default` group, as part.json) or
    /// "global" (a copy in every group, Cetus's newer rule).
    #[serde(default)]
    pub unlisted: UnlistedRule,
    #[serde(default)]
    pub vdb: Vec<toml::Value>,
    #[serde(default)]
    pub table: Vec<toml::Value>,
    #[serde(default)]
    pub single_tables: Vec<toml::Value>,
    #[serde(default)]
    pub default: BTreeMap<String, String>,
    #[serde(default)]
    pub all: BTreeMap<String, Vec<String>>,
    /// Most memory one statement's merge over several groups may hold
    /// (groups sorted by an aggregate are held until the last arrives);
    /// past it the statement fails with an error instead of growing.
    #[serde(default = "default_merge_memory_mb")]
    pub merge_memory_mb: u64,
    /// `[[sharding.sequence]]`: ids sextant gives rows inserted without
    /// them.
    #[serde(default)]
    pub sequence: Vec<SequenceConfig>,
}

/// `[xa]`: the coordinator of transactions that write to several groups
/// of a sharded layout.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Xa {
    /// The directory of the decision log (made if missing). A commit
    /// decision is synced there before any branch commits; recovery after
    /// a crash reads it, so it must outlive the process.
    #[serde(default = "default_xa_log_dir")]
    pub log_dir: String,
    /// Names this sextant in its transactions' ids, so that its recovery
    /// resolves only its own: 1-32 of `A-Z a-z 0-9 _ . -`, distinct per
    /// instance sharing the servers. Default: made once at random and
    /// kept in `log_dir`/instance-id.
    #[serde(default)]
    pub instance_id: Option<String>,
    /// How often recovery asks every group's primary for prepared branches
    /// (also at start, and at once after a branch's commit failed).
    #[serde(default = "default_recover_interval_ms")]
    pub recover_interval_ms: u64,
}

impl Default for Xa {
    fn default() -> Xa {
        Xa {
            log_dir: default_xa_log_dir(),
            instance_id: None,
            recover_interval_ms: default_recover_interval_ms(),
        }
    }
}

fn default_xa_log_dir() -> String {
    "sextant-xa".into()
}

fn default_recover_interval_ms() -> u64 {
    5000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceConfig {
    pub db: String,
    pub table: String,
    pub column: String,
    #[serde(default = "default_sequence_block")]
    pub block: u64,
}

fn default_sequence_block() -> u64 {
    1000
}

fn default_merge_memory_mb() -> u64 {
    64
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnlistedRule {
    #[default]
    DefaultGroup,
    Global,
}

/// `[log]`: what sextant logs and how. RUST_LOG, when set, overrides
/// `level`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// "text" (colours only on a terminal) or "json" (one object a line).
    #[serde(default)]
    pub format: LogFormat,
    /// Levels, as RUST_LOG takes them: "info", or per module, e.g.
    /// "info,sextant_monitor=debug". A reload applies a change.
    #[serde(default = "default_log_level")]
    pub level: String,
    /// Statements that take longer than this many milliseconds are
    /// logged (target `sextant::slow`, level warn) with their digest
    /// (values replaced by `?`), user, database and time. 0: off.
    #[serde(default)]
    pub slow_query_ms: u64,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            format: LogFormat::Text,
            level: default_log_level(),
            slow_query_ms: 0,
        }
    }
}

fn default_log_level() -> String {
    "info".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The topology monitor: one check per server every interval.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Monitor {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_monitor_interval_ms")]
    pub interval_ms: u64,
    /// Account the monitor logs in with (default: the first user's server
    /// account). It needs REPLICATION CLIENT (or SLAVE MONITOR) for
    /// replication status, and to write the heartbeat: CREATE and INSERT on
    /// the `sextant` database of the primary.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default, deserialize_with = "optional_secret")]
    pub password: Option<String>,
    /// Measure lag with a heartbeat row written on the primary every
    /// interval (millisecond precision); without it, Seconds_Behind_Master.
    #[serde(default = "yes")]
    pub heartbeat: bool,
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor {
            enabled: true,
            interval_ms: default_monitor_interval_ms(),
            user: None,
            password: None,
            heartbeat: true,
        }
    }
}

fn default_monitor_interval_ms() -> u64 {
    500
}

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
    #[serde(default = "yes")]
    pub query_digests: bool,
    /// Digests each worker thread keeps; statements of further digests
    /// are counted together (memory stays bounded).
    #[serde(default = "default_query_digests_max")]
    pub query_digests_max: usize,
    /// At SIGTERM/SIGINT, how long running statements and open
    /// transactions may take to finish before sextant exits anyway.
    #[serde(default = "default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,
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
    #[serde(default = "default_true")]
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
            query_digests: true,
            query_digests_max: default_query_digests_max(),
            max_failed_logins: default_max_failed_logins(),
            failed_login_lockout_ms: default_failed_login_lockout_ms(),
            max_prepared_statements: default_max_prepared_statements(),
            idle_in_transaction_timeout_ms: 0,
            server_version: None,
            default_group: None,
            tls_cert: None,
            tls_key: None,
            tls_self_signed: true,
            require_tls: false,
            auth_plugin: AuthPlugin::default(),
            sha2_full_auth: FullAuth::default(),
            rsa_key: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    #[serde(default = "default_admin_listen")]
    pub listen: Addr,
    /// HTTP: /metrics (Prometheus), /healthz, /readyz, /api/..., and the
    /// status page at /. Off unless set.
    #[serde(default)]
    pub http_listen: Option<Addr>,
    pub user: String,
    /// A password (see [`secret`] for the forms it may take).
    #[serde(deserialize_with = "secret")]
    pub password: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    /// What clients log in with: clear, a mysql_native_password hash
    /// (`*` and 40 hex digits, as in mysql.user), or a reference to an
    /// environment variable or a file (see [`secret`]).
    #[serde(default, deserialize_with = "secret")]
    pub password: String,
    /// What the proxy presents to the servers (default: the same).
    #[serde(default)]
    pub backend_user: Option<String>,
    #[serde(default, deserialize_with = "optional_secret")]
    pub backend_password: Option<String>,
    #[serde(default)]
    pub default_group: Option<String>,
    /// This user must connect over TLS.
    #[serde(default)]
    pub require_tls: bool,
    /// Routing keys for this user's sessions (e.g. a reporting user that
    /// always reads from replicas).
    #[serde(default)]
    pub routing: RoutingOverride,
    /// Most client sessions of this user at once (0: no limit); more get
    /// 1226, as from a server's max_user_connections.
    #[serde(default)]
    pub max_connections: usize,
    /// How this user logs in to sextant when not the listener's plugin:
    /// "ed25519" (MariaDB's client_ed25519).
    #[serde(default)]
    pub auth_plugin: Option<UserAuthPlugin>,
    /// May KILL any user's sessions (as MySQL's CONNECTION_ADMIN); others
    /// only their own user's.
    #[serde(default)]
    pub connection_admin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum UserAuthPlugin {
    #[serde(rename = "ed25519", alias = "client_ed25519")]
    Ed25519,
}

impl User {
    pub fn backend_user(&self) -> &str {
        self.backend_user.as_deref().unwrap_or(&self.name)
    }
    pub fn backend_password(&self) -> &str {
        self.backend_password.as_deref().unwrap_or(&self.password)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub primary: Addr,
    #[serde(default)]
    pub replicas: Vec<Replica>,
    /// Most server connections per server of the group.
    #[serde(default = "default_pool_max")]
    pub pool_max: usize,
    /// Connections kept open per server even when idle.
    #[serde(default)]
    pub pool_min: usize,
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Idle connections above pool_min are closed after this long.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Connections are replaced after this long, idle or not.
    #[serde(default = "default_max_lifetime_ms")]
    pub max_lifetime_ms: u64,
    /// A connection idle longer than this is pinged before it is lent out.
    #[serde(default = "default_health_check_idle_ms")]
    pub health_check_idle_ms: u64,
    /// How long a statement waits for a connection when the pool is full.
    #[serde(default = "default_pool_wait_ms")]
    pub pool_wait_ms: u64,
    /// Server-side prepared statements kept per server connection (LRU).
    #[serde(default = "default_max_prepared")]
    pub max_prepared_per_connection: usize,
    /// Pipelining: up to this many sessions' plain reads are sent on one
    /// server connection without waiting for the answers (0: off). Saves
    /// CPU on both ends under load; a slow read delays the reads queued
    /// behind it on the same connection. Unset: 8, or off with TLS to the
    /// servers (see `pipeline()`).
    #[serde(default)]
    pub pipeline_depth: Option<usize>,
    /// Server connections per server used for pipelined reads (reads that
    /// find them all full take a connection of their own).
    #[serde(default = "default_pipeline_connections")]
    pub pipeline_connections: usize,
    /// A statement whose server has not answered in full by then is
    /// abandoned (its server connection closed, the server out of rotation
    /// until it answers again): a plain read that sent nothing to the
    /// client yet runs on another server, anything else gets 9003. 0: no
    /// limit (the default: long queries are legitimate).
    #[serde(default)]
    pub query_timeout_ms: u64,
    /// The primary's weight in read balancing. 0 (the default): the primary
    /// takes reads only by read_primary_percent or when no replica can;
    /// N > 0: it takes part in balancing like a replica of weight N, so
    /// reads scale with every node of the group.
    #[serde(default)]
    pub primary_weight: u32,
    /// A replica further behind than this leaves read balancing until it
    /// catches up (0: lag is not a reason).
    #[serde(default = "default_max_lag_ms")]
    pub max_replica_lag_ms: u64,
    /// "static": the configured primary takes writes; "replication": the
    /// monitor follows which server is writable (read_only = OFF), so
    /// switchovers and failovers done by other tools are followed;
    /// "group_replication": members and roles from MySQL Group
    /// Replication; "galera": Synced nodes of a Galera cluster.
    #[serde(default)]
    pub topology: Topology,
    /// Galera: every Synced node takes writes (writes for one schema kept
    /// on one node); by default one node does.
    #[serde(default)]
    pub galera_multi_writer: bool,
    /// How long a write waits for a primary when none is known (0: fail
    /// at once).
    #[serde(default)]
    pub primary_wait_ms: u64,
    /// Connect to the servers with TLS.
    #[serde(default)]
    pub tls: bool,
    /// PEM CA certificate(s) to verify the servers' certificates with; without
    /// it the connection is encrypted but the server is not authenticated
    /// (MySQL's ssl-mode=REQUIRED).
    #[serde(default)]
    pub tls_ca: Option<String>,
}

impl Group {
    /// The pipelining depth in effect: as set, else the default, except
    /// with TLS to the servers (a TLS connection's socket cannot be shared
    /// by two tasks).
    pub fn pipeline(&self) -> usize {
        match (self.pipeline_depth, self.tls) {
            (Some(d), _) => d,
            (None, true) => 0,
            (None, false) => DEFAULT_PIPELINE_DEPTH,
        }
    }

    /// Pipelined connections per server and worker thread in effect (never
    /// more than the pool has).
    pub fn pipeline_connections(&self) -> usize {
        self.pipeline_connections.min(self.pool_max)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub addr: Addr,
    pub weight: u32,
}

impl<'de> Deserialize<'de> for Replica {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Plain(Addr),
            Full(Full),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            addr: Addr,
            #[serde(default = "one")]
            weight: u32,
        }
        fn one() -> u32 {
            1
        }
        match Form::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a replica is \"host:port\", a socket path, or { addr = \"host:port\", weight = N }",
            )
        })? {
            Form::Plain(addr) => Ok(Replica { addr, weight: 1 }),
            Form::Full(f) => Ok(Replica {
                addr: f.addr,
                weight: f.weight,
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Routing {
    /// How long a session keeps its server connection after a statement
    /// (Cetus: 256 ms), so back-to-back statements reuse it.
    #[serde(default = "default_hold_ms")]
    pub hold_ms: u64,
    /// Send everything to the primary (Cetus: master-preferred).
    #[serde(default, alias = "master-preferred")]
    pub primary_preferred: bool,
    /// Percent of reads that go to the primary, the rest to the replicas
    /// (Cetus: read-master-percentage). 0: replicas only (the primary only
    /// when none is available); 100: every read to the primary.
    #[serde(
        default,
        alias = "read-master-percentage",
        deserialize_with = "percent"
    )]
    pub read_primary_percent: u8,
    /// How a read picks among the servers that may take it.
    #[serde(default)]
    pub balance: Balance,
    /// START TRANSACTION READ ONLY runs on a replica as a whole.
    #[serde(default = "yes")]
    pub read_only_transactions_on_replicas: bool,
    /// What a read is guaranteed to see (docs/consistency.md).
    #[serde(default)]
    pub consistency: Consistency,
    /// Whose writes read_your_writes covers: the session's, or every
    /// session's of the same user on this sextant.
    #[serde(default)]
    pub consistency_scope: ConsistencyScope,
    /// With read_your_writes, how long a read may wait on a replica for a
    /// write it must see (MASTER_GTID_WAIT, sent with the read) before it
    /// goes to the primary; 0: go to the primary at once.
    #[serde(default = "default_causal_wait_ms")]
    pub causal_wait_ms: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Consistency {
    /// Any available replica within max_replica_lag_ms.
    Eventual,
    /// After a write, reads only from servers that have applied it.
    #[default]
    ReadYourWrites,
    /// A session never reads older data than it already has: it keeps to
    /// one server, and moves only to a server known to be at least as far
    /// along (by the heartbeat), else to the primary.
    Monotonic,
    /// Every read from the primary.
    Strong,
}

impl Consistency {
    /// The mode a `/*# consistency=... */` hint names.
    pub fn from_hint(v: &[u8]) -> Option<Consistency> {
        [
            (&b"eventual"[..], Consistency::Eventual),
            (b"read_your_writes", Consistency::ReadYourWrites),
            (b"monotonic", Consistency::Monotonic),
            (b"strong", Consistency::Strong),
        ]
        .into_iter()
        .find(|(n, _)| v.eq_ignore_ascii_case(n))
        .map(|(_, c)| c)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsistencyScope {
    Session,
    #[default]
    User,
}

impl Routing {
    /// Every key of [routing], as SHOW VARIABLES lists them.
    pub const KEYS: [&'static str; 8] = [
        "hold_ms",
        "primary_preferred",
        "read_primary_percent",
        "balance",
        "read_only_transactions_on_replicas",
        "consistency",
        "consistency_scope",
        "causal_wait_ms",
    ];

    /// Sets one key from its text (as the admin port's `SET key = value`
    /// gives it: `true`/`false`/`on`/`off`/`1`/`0`, numbers, names quoted
    /// or not), checked as the file's value would be. Cetus's names
    /// (master-preferred, read-master-percentage) are accepted.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let key = Config::routing_key(key);
        if !Self::KEYS.contains(&key.as_str()) {
            return Err(format!(
                "unknown routing key {key:?}; the keys are {}",
                Self::KEYS.join(", ")
            ));
        }
        let v = value.trim();
        let unquoted = v.trim_matches(|c| c == '\'' || c == '"');
        let candidates = [
            v.to_string(),
            format!("\"{unquoted}\""),
            match unquoted.to_ascii_lowercase().as_str() {
                "on" | "1" => "true".into(),
                "off" | "0" => "false".into(),
                other => other.to_string(),
            },
        ];
        let mut last = String::new();
        for c in candidates {
            match toml::from_str::<Routing>(&format!("{key} = {c}")) {
                Ok(r) => {
                    match key.as_str() {
                        "hold_ms" => self.hold_ms = r.hold_ms,
                        "primary_preferred" => self.primary_preferred = r.primary_preferred,
                        "read_primary_percent" => {
                            self.read_primary_percent = r.read_primary_percent
                        }
                        "balance" => self.balance = r.balance,
                        "read_only_transactions_on_replicas" => {
                            self.read_only_transactions_on_replicas =
                                r.read_only_transactions_on_replicas
                        }
                        "consistency" => self.consistency = r.consistency,
                        "consistency_scope" => self.consistency_scope = r.consistency_scope,
                        _ => self.causal_wait_ms = r.causal_wait_ms,
                    }
                    return Ok(());
                }
                Err(e) => last = e.message().to_string(),
            }
        }
        Err(format!("{key} = {value}: {last}"))
    }

    /// A key's value as the config file would write it.
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match key {
            "hold_ms" => self.hold_ms.to_string(),
            "primary_preferred" => self.primary_preferred.to_string(),
            "read_primary_percent" => self.read_primary_percent.to_string(),
            "balance" => file_name(&self.balance),
            "read_only_transactions_on_replicas" => {
                self.read_only_transactions_on_replicas.to_string()
            }
            "consistency" => file_name(&self.consistency),
            "consistency_scope" => file_name(&self.consistency_scope),
            "causal_wait_ms" => self.causal_wait_ms.to_string(),
            _ => return None,
        })
    }
}

impl Default for Routing {
    fn default() -> Self {
        let p = RoutingPolicy::default();
        Routing {
            hold_ms: default_hold_ms(),
            primary_preferred: p.primary_preferred,
            read_primary_percent: p.read_primary_percent,
            balance: p.balance,
            read_only_transactions_on_replicas: p.read_only_transactions_on_replicas,
            consistency: p.consistency,
            consistency_scope: p.consistency_scope,
            causal_wait_ms: p.causal_wait_ms,
        }
    }
}

impl Routing {
    pub fn policy(&self) -> RoutingPolicy {
        RoutingPolicy {
            primary_preferred: self.primary_preferred,
            read_primary_percent: self.read_primary_percent,
            balance: self.balance,
            read_only_transactions_on_replicas: self.read_only_transactions_on_replicas,
            consistency: self.consistency,
            consistency_scope: self.consistency_scope,
            causal_wait_ms: self.causal_wait_ms,
        }
    }
}

/// Where reads go: the [routing] keys, with a user's overrides applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingPolicy {
    pub primary_preferred: bool,
    pub read_primary_percent: u8,
    pub balance: Balance,
    pub read_only_transactions_on_replicas: bool,
    pub consistency: Consistency,
    pub consistency_scope: ConsistencyScope,
    pub causal_wait_ms: u64,
}

impl Default for RoutingPolicy {
    fn default() -> Self {
        RoutingPolicy {
            primary_preferred: false,
            read_primary_percent: 0,
            balance: Balance::default(),
            read_only_transactions_on_replicas: true,
            consistency: Consistency::default(),
            consistency_scope: ConsistencyScope::default(),
            causal_wait_ms: default_causal_wait_ms(),
        }
    }
}

/// Per-user overrides of [`RoutingPolicy`].
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingOverride {
    #[serde(default, alias = "master-preferred")]
    pub primary_preferred: Option<bool>,
    #[serde(
        default,
        alias = "read-master-percentage",
        deserialize_with = "opt_percent"
    )]
    pub read_primary_percent: Option<u8>,
    #[serde(default)]
    pub balance: Option<Balance>,
    #[serde(default)]
    pub read_only_transactions_on_replicas: Option<bool>,
    #[serde(default)]
    pub consistency: Option<Consistency>,
    #[serde(default)]
    pub consistency_scope: Option<ConsistencyScope>,
    #[serde(default)]
    pub causal_wait_ms: Option<u64>,
}

impl RoutingPolicy {
    pub fn with(self, o: &RoutingOverride) -> RoutingPolicy {
        RoutingPolicy {
            primary_preferred: o.primary_preferred.unwrap_or(self.primary_preferred),
            read_primary_percent: o.read_primary_percent.unwrap_or(self.read_primary_percent),
            balance: o.balance.unwrap_or(self.balance),
            read_only_transactions_on_replicas: o
                .read_only_transactions_on_replicas
                .unwrap_or(self.read_only_transactions_on_replicas),
            consistency: o.consistency.unwrap_or(self.consistency),
            consistency_scope: o.consistency_scope.unwrap_or(self.consistency_scope),
            causal_wait_ms: o.causal_wait_ms.unwrap_or(self.causal_wait_ms),
        }
    }
}

/// Most servers a group may have (its primary and replicas, or its
/// cluster's members).
pub const MAX_GROUP_SERVERS: usize = 32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
/// How a group's writer is found.
pub enum Topology {
    /// The configured primary, always.
    #[default]
    Static,
    /// The one writable (read_only = OFF) server; none while two are.
    Replication,
    /// MySQL Group Replication: the PRIMARY member(s) that are ONLINE in
    /// the majority partition; several in multi-primary mode.
    GroupReplication,
    /// Galera: Synced, ready members of the primary component; one of them
    /// takes writes, or all with `galera_multi_writer`.
    Galera,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Turns in order, each server as many turns as its weight.
    #[default]
    RoundRobin,
    /// A random pick in proportion to the weights.
    Weighted,
    /// The server with the fewest statements in flight (per unit of weight).
    LeastOutstanding,
    /// The server with the lowest moving average of response time.
    LeastLatency,
}

fn yes() -> bool {
    true
}

fn percent<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = i64::deserialize(d)?;
    if !(0..=100).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "expected a percentage from 0 to 100, got {v}"
        )));
    }
    Ok(v as u8)
}

fn opt_percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    percent(d).map(Some)
}

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
enum AddrError {
    #[error("a Unix socket path is 2 to 107 bytes long, got {0} bytes")]
    SocketPath(usize),
    #[error("expected \"host:port\", got {0:?}")]
    NoPort(String),
    #[error("expected \"host:port\", got {0:?} (no host)")]
    NoHost(String),
    #[error("expected \"host:port\" with a port from 1 to 65535, got {0:?}")]
    BadPort(String),
}

fn check_addr(s: &str) -> Result<(), AddrError> {
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

fn default_listen() -> Addr {
    Addr("127.0.0.1:6033".into())
}
fn default_admin_listen() -> Addr {
    Addr("127.0.0.1:6032".into())
}
fn default_max_connections() -> usize {
    20_000
}
fn default_max_allowed_packet() -> usize {
    64 << 20
}
fn default_statement_memory_mb() -> usize {
    512
}
fn default_max_prepared_statements() -> usize {
    16_382
}
fn default_query_digests_max() -> usize {
    2_000
}
fn default_shutdown_timeout_ms() -> u64 {
    30_000
}
fn default_handshake_timeout_ms() -> u64 {
    10_000
}
fn default_true() -> bool {
    true
}
fn default_max_failed_logins() -> u32 {
    100
}
fn default_failed_login_lockout_ms() -> u64 {
    60_000
}
/// Pipelining depth when the config names none (measured in the bench
/// matrix: docs/performance.md).
pub const DEFAULT_PIPELINE_DEPTH: usize = 8;

fn default_pipeline_connections() -> usize {
    2
}

fn default_pool_max() -> usize {
    200
}
fn default_connect_timeout_ms() -> u64 {
    2_000
}
fn default_idle_timeout_ms() -> u64 {
    60_000
}
fn default_max_lifetime_ms() -> u64 {
    3_600_000
}
fn default_health_check_idle_ms() -> u64 {
    5_000
}
fn default_pool_wait_ms() -> u64 {
    10_000
}
fn default_max_prepared() -> usize {
    256
}
fn default_max_lag_ms() -> u64 {
    1_000
}
fn default_hold_ms() -> u64 {
    256
}

/// A few times the usual lag of a replica that keeps up
/// (docs/consistency.md has the measurement): long enough that a read
/// right after a write rarely falls back to the primary, short enough
/// that a replica that has fallen behind costs a read little before it
/// does. Waits that time out keep further reads off that replica until
/// it catches up, so a lagging replica costs one budget, not one a read.
fn default_causal_wait_ms() -> u64 {
    50
}

impl Sharding {
    /// The layout, from Cetus's file or from the keys written here.
    fn layout(&self, text: &str, path: &str) -> Result<sextant_sharding::Layout, ConfigError> {
        use sextant_sharding::{cetus, LayoutError, Unlisted};
        let unlisted = match self.unlisted {
            UnlistedRule::DefaultGroup => Unlisted::DefaultGroup,
            UnlistedRule::Global => Unlisted::Global,
        };
        let inline = !self.vdb.is_empty()
            || !self.table.is_empty()
            || !self.single_tables.is_empty()
            || !self.default.is_empty()
            || !self.all.is_empty();
        let to_config = |e: LayoutError, prefix: &str| match e {
            LayoutError::Syntax {
                file,
                line,
                column,
                message,
            } => ConfigError::Parse {
                path: file,
                message: format!("line {line}, column {column}: {message}"),
            },
            LayoutError::Invalid {
                file,
                line,
                key,
                message,
            } => ConfigError::Invalid {
                path: file,
                line: (line > 0).then_some(line),
                key: format!("{prefix}{key}"),
                message,
            },
        };
        match (&self.cetus_file, inline) {
            (Some(_), true) => Err(ConfigError::Invalid {
                path: path.to_string(),
                line: None,
                key: "sharding.cetus_file".into(),
                message: "give the layout either in cetus_file or here, not both".into(),
            }),
            (Some(file), false) => {
                // Relative to the config file, as people write it.
                let p = Path::new(path)
                    .parent()
                    .map(|d| d.join(file))
                    .filter(|_| Path::new(file).is_relative())
                    .unwrap_or_else(|| Path::new(file).to_path_buf());
                let shown = p.display().to_string();
                let json = std::fs::read_to_string(&p).map_err(|source| ConfigError::Read {
                    path: shown.clone(),
                    source,
                })?;
                cetus::parse(&json, &shown, unlisted).map_err(|e| to_config(e, ""))
            }
            (None, _) => {
                let mut root = serde_json::Map::new();
                root.insert("vdb".into(), to_json(&self.vdb));
                root.insert("table".into(), to_json(&self.table));
                root.insert("single_tables".into(), to_json(&self.single_tables));
                root.insert("default".into(), to_json(&self.default));
                root.insert("all".into(), to_json(&self.all));
                let root = serde_json::Value::Object(root);
                cetus::from_value(&root, text, path, unlisted)
                    .map_err(|e| to_config(e, "sharding."))
            }
        }
        .and_then(|layout| self.with_sequences(layout, path))
    }

    /// The layout with its sequences, each for a table the layout places
    /// in one group or spreads (a global table's copies would each need
    /// the same id: not given).
    fn with_sequences(
        &self,
        mut layout: sextant_sharding::Layout,
        path: &str,
    ) -> Result<sextant_sharding::Layout, ConfigError> {
        use sextant_sharding::Placement;
        for (i, s) in self.sequence.iter().enumerate() {
            let invalid = |message: String| ConfigError::Invalid {
                path: path.to_string(),
                line: None,
                key: format!("sharding.sequence[{i}]"),
                message,
            };
            if s.block == 0 || s.column.is_empty() {
                return Err(invalid(
                    "a sequence needs a column and a block of at least 1".into(),
                ));
            }
            match layout.placement(&s.db, &s.table) {
                Placement::Sharded { .. }
                | Placement::Single { .. }
                | Placement::Default { .. } => {}
                _ => {
                    return Err(invalid(format!(
                        "{}.{} is not a sharded or single table of the layout",
                        s.db, s.table
                    )))
                }
            }
            let key = (s.db.to_ascii_lowercase(), s.table.to_ascii_lowercase());
            let seq = sextant_sharding::Sequence {
                column: s.column.to_ascii_lowercase(),
                block: s.block,
            };
            if layout.sequences.insert(key, seq).is_some() {
                return Err(invalid(format!("{}.{} has two sequences", s.db, s.table)));
            }
        }
        Ok(layout)
    }
}

/// A password as the config may give it: a string, or
/// `{ env = "NAME" }` (the environment variable's value) or
/// `{ file = "/path" }` (the file's contents, without a trailing newline),
/// so that the file itself need not hold it. Read when the config is
/// loaded (and again at each reload).
fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Clear(String),
        Ref(Reference),
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reference {
        env: Option<String>,
        file: Option<String>,
    }
    use serde::de::Error;
    let form = Form::deserialize(d).map_err(|_| {
        D::Error::custom(
            "a password is a string, { env = \"VARIABLE\" } or { file = \"/path/to/file\" }",
        )
    })?;
    match form {
        Form::Clear(s) => Ok(s),
        Form::Ref(Reference {
            env: Some(name),
            file: None,
        }) => std::env::var(&name).map_err(|_| {
            D::Error::custom(format!(
                "environment variable {name:?} (named for this password) is not set"
            ))
        }),
        Form::Ref(Reference {
            env: None,
            file: Some(path),
        }) => match std::fs::read_to_string(&path) {
            Ok(s) => Ok(s
                .strip_suffix('\n')
                .unwrap_or(&s)
                .trim_end_matches('\r')
                .to_string()),
            Err(e) => Err(D::Error::custom(format!(
                "cannot read the password file {path:?}: {e}"
            ))),
        },
        Form::Ref(_) => Err(D::Error::custom(
            "give either env or file, not both (or neither)",
        )),
    }
}

fn optional_secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    secret(d).map(Some)
}

/// Whether `p` is a mysql_native_password hash (`*` and 40 hex digits,
/// SHA1(SHA1(password)) as mysql.user stores it) rather than a password.
pub fn is_native_hash(p: &str) -> bool {
    p.len() == 41 && p.starts_with('*') && p[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// A setting's enum value as the file writes it: its variant in
/// snake_case (`LeastLatency` -> `least_latency`).
pub fn file_name(v: &dyn std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{v:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// A `[log] level` is a list of `level` or `target=level` directives
/// (RUST_LOG's form, without its span filters).
fn check_log_level(v: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for d in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (target, level) = match d.split_once('=') {
            Some((t, l)) => (Some(t.trim()), l.trim()),
            None => (None, d),
        };
        let target_ok = target.is_none_or(|t| {
            !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        });
        if !target_ok || !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "{d:?}: give a level (off, error, warn, info, debug, trace) or module=level, separated by commas, e.g. \"info,sextant_monitor=debug\""
            ));
        }
    }
    Ok(())
}

/// A value of the TOML section as JSON, for the reader of Cetus's format.
fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: p.clone(),
            source,
        })?;
        Config::parse(&text, &p)
    }

    /// Parses and validates `text`; `path` is only used in messages (and
    /// to find a Cetus sharding file named relative to it).
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let mut cfg: Config = match toml::from_str(text) {
            Ok(c) => c,
            Err(e) => return Err(Self::every_parse_error(text, path, e)),
        };
        cfg.validate(text, path)?;
        if let Some(sh) = &cfg.sharding {
            let layout = sh.layout(text, path)?;
            let defined: Vec<&str> = cfg.groups.keys().map(String::as_str).collect();
            let missing = layout.undefined_groups(&defined);
            if !missing.is_empty() {
                return Err(ConfigError::Invalid {
                    path: path.to_string(),
                    line: None,
                    key: "sharding".into(),
                    message: format!(
                        "the layout places rows in group(s) {}, which [groups] does not define",
                        missing.join(", ")
                    ),
                });
            }
            cfg.layout = Some(layout);
        }
        Ok(cfg)
    }

    /// Every problem of a file that does not parse, not just the first:
    /// the line of each error is blanked out (an unknown key) or its value
    /// replaced by one of another type (a bad value of a key that must be
    /// there), and the rest parsed again; then what parses is checked too,
    /// leaving out what it says of the replaced values. Stops where that
    /// cannot help (a broken table header, a value over several lines).
    fn every_parse_error(text: &str, path: &str, first: toml::de::Error) -> ConfigError {
        let parse_error = |e: &toml::de::Error| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string().trim_end().to_string(),
        };
        // The line (0-based) an error points at, in the text it came from.
        let line_of = |e: &toml::de::Error, t: &str| {
            e.span()
                .map(|sp| t[..sp.start.min(t.len())].matches('\n').count())
        };
        let mut errors = vec![parse_error(&first)];
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // Lines whose values sextant replaced: checks of them are not the
        // user's problem.
        let mut replaced: Vec<usize> = Vec::new();
        let mut blanked: Vec<String> = Vec::new();
        let mut next = first;
        // The text `next` came from (spans are offsets into it).
        let mut current = text.to_string();
        'errors: for _ in 0..50 {
            let Some(line) = line_of(&next, &current) else {
                break;
            };
            let Some(original) = lines.get(line).cloned() else {
                break;
            };
            let t = original.trim_start();
            if t.is_empty() || t.starts_with('[') || t.starts_with('#') {
                break;
            }
            let key = t.split_once('=').map(|(k, _)| k.trim().to_string());
            if let Some(k) = &key {
                blanked.push(k.trim_matches('"').to_string());
            }
            // Without the line first; then the key with a value of each
            // type, for a key that must be there.
            let mut candidates = vec![String::new()];
            if let Some(k) = &key {
                for v in ["\"\"", "0", "false", "[]", "{}"] {
                    candidates.push(format!("{k} = {v}"));
                }
            }
            for (n, candidate) in candidates.into_iter().enumerate() {
                lines[line] = candidate;
                let rest = lines.join("\n");
                match toml::from_str::<Config>(&rest) {
                    Ok(cfg) => {
                        if n > 0 {
                            replaced.push(line + 1);
                        }
                        let mut more = Vec::new();
                        cfg.check(&rest, path, &mut more);
                        errors.extend(more.into_iter().filter(|e| {
                            !matches!(e, ConfigError::Invalid { line: Some(l), .. } if replaced.contains(l))
                        }));
                        break 'errors;
                    }
                    Err(e) => {
                        let missing = blanked
                            .iter()
                            .any(|k| e.message().contains(&format!("missing field `{k}`")));
                        if missing || line_of(&e, &rest) == Some(line) {
                            // This replacement does not get past the line.
                            continue;
                        }
                        if n > 0 {
                            replaced.push(line + 1);
                        }
                        errors.push(parse_error(&e));
                        next = e;
                        current = rest;
                        continue 'errors;
                    }
                }
            }
            break;
        }
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Several(errors),
        }
    }

    /// A routing key's name in the file (Cetus's names mapped to
    /// sextant's).
    pub fn routing_key(key: &str) -> String {
        match key.to_ascii_lowercase().as_str() {
            "master-preferred" | "master_preferred" => "primary_preferred".into(),
            "read-master-percentage" | "read_master_percentage" => "read_primary_percent".into(),
            k => k.to_string(),
        }
    }

    /// Checks a config changed in memory (the admin port's SET), as a
    /// file is checked (without line numbers: there is no file).
    pub fn recheck(&self) -> Result<(), ConfigError> {
        self.validate("", "(running config)")
    }

    fn validate(&self, text: &str, path: &str) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        self.check(text, path, &mut errors);
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    /// Every problem, not just the first: a user fixing a config should
    /// see all of them at once.
    fn check(&self, text: &str, path: &str, errors: &mut Vec<ConfigError>) {
        // (Parsed again for its spans: serde gave the values, this says
        // where each key is written.)
        let doc = toml_edit::ImDocument::parse(text).ok();
        let err_at = |table: &str, index: usize, key: &str, message: String| ConfigError::Invalid {
            path: path.to_string(),
            line: locate(doc.as_ref(), text, table, index, key),
            key: if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            },
            message,
        };
        let err = |table: &str, key: &str, message: String| err_at(table, 0, key, message);
        if self.groups.is_empty() {
            errors.push(err(
                "",
                "groups",
                "no server group is defined; add e.g. [groups.main] with primary = \"127.0.0.1:3306\"".into(),
            ));
        }
        if self.users.is_empty() {
            errors.push(err(
                "",
                "users",
                "no user is defined; add a [[users]] entry with name and password".into(),
            ));
        }
        if let Some(id) = &self.xa.instance_id {
            let ok = (1..=32).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
            if !ok {
                errors.push(err(
                    "xa",
                    "instance_id",
                    format!("{id:?}: an instance id is 1 to 32 letters, digits, '_', '.' or '-' (it is written into every transaction id)"),
                ));
            }
        }
        if self.xa.recover_interval_ms == 0 {
            errors.push(err(
                "xa",
                "recover_interval_ms",
                "must be at least 1 (recovery must run)".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.name.is_empty() {
                errors.push(err_at(
                    "users",
                    i,
                    "name",
                    "a user name must not be empty".into(),
                ));
            }
            if !seen.insert(&u.name) {
                errors.push(err_at(
                    "users",
                    i,
                    "name",
                    format!("user {:?} is defined twice", u.name),
                ));
            }
            if let Some(g) = &u.default_group {
                if !self.groups.contains_key(g) {
                    errors.push(err_at(
                        "users",
                        i,
                        "default_group",
                        format!("user {:?} names group {g:?}, which is not defined", u.name),
                    ));
                }
            }
        }
        for (i, u) in self.users.iter().enumerate() {
            if !is_native_hash(&u.password) {
                continue;
            }
            if u.backend_password.is_none() {
                errors.push(err_at(
                    "users",
                    i,
                    "password",
                    format!("user {:?}: a mysql_native_password hash checks clients' logins, but sextant cannot log in to the servers with it; give backend_password (clear, {{ env = ... }} or {{ file = ... }})", u.name),
                ));
            } else if u.backend_password.as_deref().is_some_and(is_native_hash) {
                errors.push(err_at(
                    "users",
                    i,
                    "backend_password",
                    format!("user {:?}: sextant logs in to the servers with backend_password, so it must be the password itself, not its hash", u.name),
                ));
            }
            if u.auth_plugin.is_some() {
                errors.push(err_at(
                    "users",
                    i,
                    "auth_plugin",
                    format!("user {:?}: client_ed25519 needs the clear password, not a mysql_native_password hash", u.name),
                ));
            }
        }
        if self.monitor.password.as_deref().is_some_and(is_native_hash) {
            errors.push(err(
                "monitor",
                "password",
                "the monitor logs in to the servers: give its password, not a hash".into(),
            ));
        }
        if let Some(g) = &self.proxy.default_group {
            if !self.groups.contains_key(g) {
                errors.push(err(
                    "proxy",
                    "default_group",
                    format!("group {g:?} is not defined"),
                ));
            }
        } else if self.groups.len() > 1 {
            errors.push(err(
                "proxy",
                "default_group",
                "several groups are defined, so [proxy] default_group must say which one users get"
                    .into(),
            ));
        }
        let listens: Vec<(&str, &str, &Addr)> =
            std::iter::once(("proxy", "listen", &self.proxy.listen))
                .chain(self.admin.iter().map(|a| ("admin", "listen", &a.listen)))
                .chain(
                    self.admin
                        .iter()
                        .filter_map(|a| Some(("admin", "http_listen", a.http_listen.as_ref()?))),
                )
                .collect();
        for (i, (table, key, a)) in listens.iter().enumerate() {
            if let Some((t0, k0, _)) = listens[..i].iter().find(|(_, _, b)| b == a) {
                errors.push(err(
                    table,
                    key,
                    format!("{a} is also [{t0}] {k0}; give each listener its own address"),
                ));
            }
        }
        let listens: Vec<(&str, &Addr)> = listens.iter().map(|(t, _, a)| (*t, *a)).collect();
        for (table, a) in listens {
            if a.is_unix_path() {
                errors.push(err(
                    table,
                    "listen",
                    format!("{a}: sextant listens on TCP only; give \"host:port\""),
                ));
            }
        }
        for (name, g) in &self.groups {
            let t = format!("groups.{name}");
            if g.pool_max == 0 {
                errors.push(err(&t, "pool_max", "must be at least 1".into()));
            }
            if g.pool_min > g.pool_max {
                errors.push(err(
                    &t,
                    "pool_min",
                    format!("{} is more than pool_max ({})", g.pool_min, g.pool_max),
                ));
            }
            if g.connect_timeout_ms == 0 {
                errors.push(err(&t, "connect_timeout_ms", "must be more than 0".into()));
            }
            // (sextant_backend::pipe::MAX_DEPTH)
            let depth = g.pipeline_depth.unwrap_or(0);
            if depth > 16 {
                errors.push(err(
                    &t,
                    "pipeline_depth",
                    format!("{depth} is more than 16 (what a pipe can have queued must fit in the socket buffers: docs/performance.md)"),
                ));
            }
            // (Only when set: by default, pipelining fits itself to the
            // rest of the group.)
            if depth > 0 {
                if g.pipeline_connections == 0 || g.pipeline_connections > g.pool_max {
                    errors.push(err(
                        &t,
                        "pipeline_connections",
                        format!(
                            "must be from 1 to pool_max ({}) when pipeline_depth is set",
                            g.pool_max
                        ),
                    ));
                }
                if g.tls {
                    errors.push(err(
                        &t,
                        "pipeline_depth",
                        "pipelining shares a connection's socket between two tasks, which TLS does not allow; use tls = false or pipeline_depth = 0".into(),
                    ));
                }
            }
            if g.galera_multi_writer && g.topology != Topology::Galera {
                errors.push(err(
                    &t,
                    "galera_multi_writer",
                    "needs topology = \"galera\"".into(),
                ));
            }
            if g.tls {
                let unix = std::iter::once(&g.primary)
                    .chain(g.replicas.iter().map(|r| &r.addr))
                    .find(|a| a.is_unix_path());
                if let Some(a) = unix {
                    errors.push(err(
                        &t,
                        "tls",
                        format!("{a} is a Unix socket; TLS is for TCP servers (a socket never leaves the host)"),
                    ));
                }
            }
            if g.replicas.len() + 1 > MAX_GROUP_SERVERS {
                errors.push(err(
                    &t,
                    "replicas",
                    format!("a group has at most {MAX_GROUP_SERVERS} servers"),
                ));
            }
            for r in &g.replicas {
                if r.weight == 0 {
                    errors.push(err(
                        &t,
                        "replicas",
                        format!(
                            "replica {} has weight 0; remove it or give it a weight of 1 or more",
                            r.addr
                        ),
                    ));
                }
                if r.addr == g.primary {
                    errors.push(err(
                        &t,
                        "replicas",
                        format!("{} is also the primary", r.addr),
                    ));
                }
            }
        }
        match (&self.proxy.tls_cert, &self.proxy.tls_key) {
            (Some(_), None) => errors.push(err(
                "proxy",
                "tls_cert",
                "tls_cert is set but tls_key is not; give both".into(),
            )),
            (None, Some(_)) => errors.push(err(
                "proxy",
                "tls_key",
                "tls_key is set but tls_cert is not; give both".into(),
            )),
            _ => {}
        }
        let tls = self.proxy.tls_cert.is_some();
        if self.proxy.require_tls && !tls {
            errors.push(err(
                "proxy",
                "require_tls",
                "require_tls needs tls_cert and tls_key".into(),
            ));
        }
        if let Some((i, u)) = self
            .users
            .iter()
            .enumerate()
            .find(|(_, u)| u.require_tls && !tls)
        {
            errors.push(err_at(
                "users",
                i,
                "require_tls",
                format!(
                    "user {:?} requires TLS, but [proxy] has no tls_cert/tls_key",
                    u.name
                ),
            ));
        }
        for (name, g) in &self.groups {
            if g.primary_weight > 0 && self.routing.read_primary_percent > 0 {
                errors.push(err(
                    &format!("groups.{name}"),
                    "primary_weight",
                    "give the primary a share of reads either by primary_weight or by [routing] read_primary_percent, not both".into(),
                ));
            }
            if g.tls_ca.is_some() && !g.tls {
                errors.push(err(
                    &format!("groups.{name}"),
                    "tls_ca",
                    "tls_ca is set but tls is not; add tls = true".into(),
                ));
            }
        }
        if let Err(m) = check_log_level(&self.log.level) {
            errors.push(err("log", "level", m));
        }
        if self.monitor.interval_ms < 50 {
            errors.push(err("monitor", "interval_ms", "must be at least 50".into()));
        }
        if self.monitor.user.is_some() != self.monitor.password.is_some() {
            errors.push(err(
                "monitor",
                "user",
                "give both user and password, or neither".into(),
            ));
        }
        if self.proxy.max_allowed_packet < 1024 {
            errors.push(err(
                "proxy",
                "max_allowed_packet",
                "must be at least 1024 bytes".into(),
            ));
        }
        if self.proxy.statement_memory_mb == 0 {
            errors.push(err(
                "proxy",
                "statement_memory_mb",
                "must be at least 1 (MB)".into(),
            ));
        }
    }

    /// The group a user's statements go to.
    pub fn group_for<'a>(&'a self, user: &'a User) -> &'a str {
        user.default_group
            .as_deref()
            .or(self.proxy.default_group.as_deref())
            .or_else(|| self.groups.keys().next().map(|s| s.as_str()))
            .unwrap_or("")
    }
}

/// The line of `key` in `table` (dotted, e.g. "groups.main"; in an array
/// of tables such as [[users]], its `index`-th entry), from the spans the
/// TOML parser keeps; a table's own header when the key is not written.
fn locate(
    doc: Option<&toml_edit::ImDocument<&str>>,
    text: &str,
    table: &str,
    index: usize,
    key: &str,
) -> Option<usize> {
    use toml_edit::{Item, TableLike, Value};
    let mut t: &dyn TableLike = doc?.as_table();
    for seg in table.split('.').filter(|s| !s.is_empty()) {
        t = match t.get(seg)? {
            Item::Table(x) => x,
            Item::ArrayOfTables(a) => a.get(index)?,
            Item::Value(Value::InlineTable(x)) => x,
            _ => return None,
        };
    }
    let span = match t.get_key_value(key) {
        Some((k, v)) => k.span().or_else(|| v.span()),
        None => t.get(key).and_then(|v| v.span()),
    }?;
    Some(text[..span.start.min(text.len())].matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_EXAMPLE: &str = r#"
[proxy]
listen = "127.0.0.1:6033"
# threads = 0                      # 0 = one per core

[admin]
listen = "127.0.0.1:6032"           # MySQL-protocol admin port
user = "admin"
password = "adminpass"

[[users]]
name = "app"
password = "apppass"                # what the client presents to the proxy

[groups.main]
primary  = "127.0.0.1:3307"
replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]   # an entry may also be { addr = "127.0.0.1:3308", weight = 2 }
"#;

    #[test]
    fn pipelining_is_on_unless_set_off_or_the_servers_speak_tls() {
        let with = |extra: &str| {
            let text = format!("{ISSUE_EXAMPLE}{extra}");
            let c = Config::parse(&text, "x.toml").unwrap();
            let g = &c.groups["main"];
            (g.pipeline(), g.pipeline_connections())
        };
        assert_eq!(with(""), (DEFAULT_PIPELINE_DEPTH, 2));
        assert_eq!(with("pipeline_depth = 0\n"), (0, 2));
        assert_eq!(with("pipeline_depth = 4\n"), (4, 2));
        assert_eq!(with("tls = true\n").0, 0);
        // A pool of one connection has one to pipeline on.
        assert_eq!(with("pool_max = 1\n"), (DEFAULT_PIPELINE_DEPTH, 1));
    }

    #[test]
    fn the_documented_example_parses() {
        let c = Config::parse(ISSUE_EXAMPLE, "x.toml").unwrap();
        let g = &c.groups["main"];
        assert_eq!(g.primary.0, "127.0.0.1:3307");
        assert_eq!(g.replicas.len(), 2);
        assert_eq!(g.pool_max, 200);
        assert_eq!(c.routing.hold_ms, 256);
        assert_eq!(c.users[0].backend_user(), "app");
        assert_eq!(c.group_for(&c.users[0]), "main");
        assert_eq!(c.admin.unwrap().user, "admin");
    }

    #[test]
    fn weighted_replicas() {
        let t = ISSUE_EXAMPLE.replace(
            r#"replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]"#,
            r#"replicas = [{ addr = "127.0.0.1:3308", weight = 2 }, "127.0.0.1:3309"]"#,
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        assert_eq!(c.groups["main"].replicas[0].weight, 2);
        assert_eq!(c.groups["main"].replicas[1].weight, 1);
    }

    #[test]
    fn servers_on_unix_sockets() {
        let t = ISSUE_EXAMPLE.replace(
            r#"replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]"#,
            r#"replicas = ["/run/mysqld/r1.sock", { addr = "/run/mysqld/r2.sock", weight = 2 }]"#,
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let g = &c.groups["main"];
        assert!(g.replicas[0].addr.is_unix_path());
        assert_eq!(g.replicas[1].addr.0, "/run/mysqld/r2.sock");
        assert_eq!(g.replicas[1].weight, 2);
        assert!(!g.primary.is_unix_path());
    }

    fn err_of(text: &str) -> String {
        Config::parse(text, "sextant.toml").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // Each case: a change to the example, and what the message must say.
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "primary  =",
                "prmary  =",
                &["sextant.toml", "line 16", "prmary", "primary"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"127.0.0.1\"",
                &["line 3", "host:port"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"127.0.0.1:99999\"",
                &["line 3", "65535"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npool_max = 0",
                &["sextant.toml:16", "groups.main.pool_max", "at least 1"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npool_min = 500",
                &["groups.main.pool_min", "more than pool_max"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 8\npipeline_connections = 0",
                &["groups.main.pipeline_connections", "from 1 to pool_max"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 8\ntls = true",
                &["groups.main.pipeline_depth", "TLS"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 64",
                &["groups.main.pipeline_depth", "more than 16"],
            ),
            (
                "\"127.0.0.1:3309\"]",
                "{ addr = \"127.0.0.1:3309\", weight = 0 }]",
                &["weight 0"],
            ),
            (
                "\"127.0.0.1:3309\"]",
                "{ adr = \"127.0.0.1:3309\" }]",
                &["line 17", "replica is"],
            ),
            (
                "[proxy]",
                "[proxy]\nthreads = \"four\"",
                &["line 3", "threads", "expected usize"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"/tmp/sextant.sock\"",
                &["proxy.listen", "TCP only"],
            ),
            (
                "primary  = \"127.0.0.1:3307\"",
                "primary  = \"/run/mysqld/mysqld.sock\"\ntls = true",
                &["groups.main.tls", "Unix socket"],
            ),
            (
                "primary  = \"127.0.0.1:3307\"",
                "primary  = \"/\"",
                &["line 16", "Unix socket path"],
            ),
        ];
        for (from, to, want) in cases {
            assert!(ISSUE_EXAMPLE.contains(from), "{from}");
            let msg = err_of(&ISSUE_EXAMPLE.replacen(from, to, 1));
            for w in *want {
                assert!(msg.contains(w), "message for {to:?} lacks {w:?}:\n{msg}");
            }
        }
    }

    #[test]
    fn routing_keys_and_cetus_aliases() {
        let t = format!(
            "{ISSUE_EXAMPLE}\n[routing]\nread-master-percentage = 30\nmaster-preferred = true\nbalance = \"least_latency\"\n"
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let p = c.routing.policy();
        assert_eq!(p.read_primary_percent, 30);
        assert!(p.primary_preferred);
        assert_eq!(p.balance, Balance::LeastLatency);
        assert!(p.read_only_transactions_on_replicas);
        let t = format!("{ISSUE_EXAMPLE}\n[routing]\nread_primary_percent = 101\n");
        assert!(err_of(&t).contains("0 to 100"));
        let t = format!("{ISSUE_EXAMPLE}\n[routing]\nbalance = \"random\"\n");
        assert!(err_of(&t).contains("round_robin"));
        let t = ISSUE_EXAMPLE.replace(
            "password = \"apppass\"",
            "password = \"apppass\"\nrouting = { read_primary_percent = 100 }",
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let p = c.routing.policy().with(&c.users[0].routing);
        assert_eq!(p.read_primary_percent, 100);
        assert!(!p.primary_preferred);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let t = ISSUE_EXAMPLE
            .replace(
                "[groups.main]",
                "[groups.main]\npool_max = 0\nconnect_timeout_ms = 0",
            )
            .replace("[proxy]", "[proxy]\nrequire_tls = true");
        let msg = err_of(&t);
        for want in ["pool_max", "connect_timeout_ms", "require_tls"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        assert_eq!(msg.lines().count(), 3, "{msg}");
    }

    #[test]
    fn every_parse_error_is_reported_at_once() {
        let t = ISSUE_EXAMPLE
            .replace("[proxy]", "[proxy]\nlisten_typo = 1\nthreads = \"four\"")
            .replace("[groups.main]", "[groups.main]\npool_mx = 3\npool_max = 0");
        let msg = err_of(&t);
        for want in ["listen_typo", "threads", "pool_mx", "pool_max"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        // Three mistakes in three sections, one of them a bad value of a
        // key that must be there: all three named.
        let t = ISSUE_EXAMPLE
            .replace("[proxy]", "[proxy]\nbogus_key = 1")
            .replace("password = \"adminpass\"", "password = 5")
            .replace(
                "password = \"apppass\"",
                "password = \"apppass\"\ncolour = \"blue\"",
            );
        let msg = err_of(&t);
        for want in ["bogus_key", "password", "colour"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        assert_eq!(msg.matches("TOML parse error").count(), 3, "{msg}");
        // A bad value of a required key: reported once, not as missing too.
        let t = ISSUE_EXAMPLE.replace("primary  = \"127.0.0.1:3307\"", "primary = 3307");
        let msg = err_of(&t);
        assert!(!msg.contains("missing field"), "{msg}");
    }

    #[test]
    fn two_listeners_on_one_address_are_refused() {
        let t = ISSUE_EXAMPLE.replace("127.0.0.1:6032", "127.0.0.1:6033");
        let msg = err_of(&t);
        assert!(
            msg.contains("admin.listen") && msg.contains("also [proxy] listen"),
            "{msg}"
        );
    }

    #[test]
    fn log_levels_are_checked() {
        let ok = format!(
            "{ISSUE_EXAMPLE}\n[log]\nlevel = \"info, sextant_monitor=debug\"\nformat = \"json\"\n"
        );
        assert!(Config::parse(&ok, "x.toml").is_ok());
        let bad = format!("{ISSUE_EXAMPLE}\n[log]\nlevel = \"loud\"\n");
        assert!(err_of(&bad).contains("log.level"));
        let bad = format!("{ISSUE_EXAMPLE}\n[log]\nlevel = \"info,sextant monitor=debug\"\n");
        assert!(err_of(&bad).contains("log.level"));
    }

    #[test]
    fn passwords_from_the_environment_files_and_hashes() {
        let dir = std::env::temp_dir().join(format!("sextant-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "from-a-file\n").unwrap();
        std::env::set_var("SEXTANT_TEST_SECRET_PW", "from-the-env");
        let t = ISSUE_EXAMPLE
            .replace(
                "password = \"apppass\"",
                &format!(
                    "password = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\nbackend_password = {{ file = {:?} }}",
                    file.display().to_string()
                ),
            )
            .replace(
                "password = \"adminpass\"",
                "password = { env = \"SEXTANT_TEST_SECRET_PW\" }",
            );
        let c = Config::parse(&t, "x.toml").unwrap();
        assert_eq!(
            c.users[0].password,
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
        assert_eq!(c.users[0].backend_password(), "from-a-file");
        assert_eq!(c.admin.as_ref().unwrap().password, "from-the-env");
        // A missing variable or file is an error at its line.
        let missing = t.replace("SEXTANT_TEST_SECRET_PW", "SEXTANT_TEST_NO_SUCH_VAR");
        let msg = err_of(&missing);
        assert!(
            msg.contains("SEXTANT_TEST_NO_SUCH_VAR") && msg.contains("not set"),
            "{msg}"
        );
        let gone = t.replace(&file.display().to_string(), "/nonexistent/pw");
        assert!(err_of(&gone).contains("cannot read the password file"));
        // A hash alone cannot log in to the servers.
        let hash_only = ISSUE_EXAMPLE.replace(
            "password = \"apppass\"",
            "password = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"",
        );
        assert!(err_of(&hash_only).contains("backend_password"));
        assert!(is_native_hash("*2470c0c06dee42fd1618bb99005adca2ec9d1e19"));
        assert!(!is_native_hash("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn routing_keys_are_set_from_admin_text() {
        let mut r = Routing::default();
        r.set("balance", "least_latency").unwrap();
        assert_eq!(r.get("balance").as_deref(), Some("least_latency"));
        r.set("balance", "'weighted'").unwrap();
        assert_eq!(r.balance, Balance::Weighted);
        r.set("master-preferred", "ON").unwrap();
        assert!(r.primary_preferred);
        r.set("primary_preferred", "0").unwrap();
        assert!(!r.primary_preferred);
        r.set("read-master-percentage", "30").unwrap();
        assert_eq!(r.read_primary_percent, 30);
        assert!(r.set("read_primary_percent", "130").is_err());
        assert!(r.set("balance", "fastest").unwrap_err().contains("balance"));
        assert!(r
            .set("no_such", "1")
            .unwrap_err()
            .contains("unknown routing key"));
        r.set("consistency", "\"strong\"").unwrap();
        assert_eq!(r.get("consistency").as_deref(), Some("strong"));
        assert_eq!(r.get("consistency_scope").as_deref(), Some("user"));
        assert_eq!(r.get("causal_wait_ms").as_deref(), Some("50"));
    }

    #[test]
    fn structural_errors() {
        assert!(err_of("[proxy]\n").contains("no server group"));
        assert!(err_of("[groups.a]\nprimary=\"h:1\"\n").contains("no user"));
        let two = format!("{ISSUE_EXAMPLE}\n[groups.other]\nprimary = \"127.0.0.1:4000\"\n");
        assert!(err_of(&two).contains("default_group"));
        let dup = format!("{ISSUE_EXAMPLE}\n[[users]]\nname = \"app\"\n");
        assert!(err_of(&dup).contains("defined twice"));
    }
}
