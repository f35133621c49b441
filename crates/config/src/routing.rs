//! `[routing]` (and per user, per group): where statements go and what reads must see.

use crate::{file_name, Balance, Config};
use serde::{Deserialize, Deserializer};

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
    #[serde(default = "crate::yes")]
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

pub(crate) fn percent<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = i64::deserialize(d)?;
    if !(0..=100).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "expected a percentage from 0 to 100, got {v}"
        )));
    }
    Ok(v as u8)
}

pub(crate) fn opt_percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    percent(d).map(Some)
}

pub(crate) fn default_max_lag_ms() -> u64 {
    1_000
}

pub(crate) fn default_hold_ms() -> u64 {
    256
}

/// A few times the usual lag of a replica that keeps up
/// (docs/consistency.md has the measurement): long enough that a read
/// right after a write rarely falls back to the primary, short enough
/// that a replica that has fallen behind costs a read little before it
/// does. Waits that time out keep further reads off that replica until
/// it catches up, so a lagging replica costs one budget, not one a read.
pub(crate) fn default_causal_wait_ms() -> u64 {
    50
}
