//! `[cluster]`: several sextant instances as one fleet, sharing their
//! intended configuration through etcd. Without the section an instance
//! stands alone, as it always has.

use crate::check::Checker;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// etcd's client URLs (`http://host:2379`, or `https://` with
    /// `ca_file`). Any one reachable member of the etcd cluster will do.
    pub etcd: Vec<String>,
    /// The fleet's name: instances with the same name (and the same etcd)
    /// are one fleet; its keys live under `/sextant/<name>/`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The fleet's shared secret: every member record and intent carries
    /// an HMAC under it, and peers log in to each other with a credential
    /// derived from it. Whoever can write to etcd without it can add no
    /// member and change no setting. At least 16 characters (e.g. `openssl
    /// rand -hex 32`); the same on every instance; a string, `{ env = ...
    /// }` or `{ file = ... }`.
    #[serde(deserialize_with = "crate::secrets::secret")]
    pub secret: String,
    /// etcd authentication, when etcd has it switched on.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default, deserialize_with = "crate::secrets::optional_secret")]
    pub password: Option<String>,
    /// The CA that signed etcd's certificate (https endpoints), and this
    /// instance's own certificate and key when etcd asks for one.
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub cert_file: Option<String>,
    #[serde(default)]
    pub key_file: Option<String>,
    /// How long an instance stays listed after it stopped renewing its
    /// membership (it renews every third of it).
    #[serde(default = "default_lease_ttl_ms")]
    pub lease_ttl_ms: u64,
    /// Where the instance keeps what must outlive a restart: its id.
    #[serde(default = "default_state_dir")]
    pub state_dir: String,
    /// This instance's id in the fleet: 1-32 of `A-Z a-z 0-9 _ . -`.
    /// Default: made once at random and kept in `state_dir`/instance-id.
    #[serde(default)]
    pub instance_id: Option<String>,
    /// The address other instances and operators reach this one's admin
    /// port at (default: `[admin] listen`).
    #[serde(default)]
    pub advertise: Option<String>,
}

fn default_name() -> String {
    "sextant".into()
}

pub(crate) fn default_lease_ttl_ms() -> u64 {
    3000
}

fn default_state_dir() -> String {
    "sextant-state".into()
}

/// What an instance id and a fleet name may hold (they are parts of etcd
/// keys and of transaction ids).
pub fn valid_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl Cluster {
    pub(crate) fn check(&self, c: &mut Checker) {
        if self.secret.len() < 16 {
            c.err(
                "cluster",
                "secret",
                "the fleet's shared secret needs at least 16 characters (e.g. the output of openssl rand -hex 32), the same on every instance".into(),
            );
        }
        if self.etcd.is_empty() {
            c.err(
                "cluster",
                "etcd",
                "give at least one etcd client URL, e.g. [\"http://127.0.0.1:2379\"]".into(),
            );
        }
        for u in &self.etcd {
            let tls = u.starts_with("https://");
            if !tls && !u.starts_with("http://") {
                c.err(
                    "cluster",
                    "etcd",
                    format!("{u:?}: an etcd URL starts with http:// or https://"),
                );
            }
            if tls && self.ca_file.is_none() {
                c.err(
                    "cluster",
                    "ca_file",
                    format!("{u:?} is https: give the CA that signed etcd's certificate"),
                );
            }
        }
        if !valid_id(&self.name) {
            c.err(
                "cluster",
                "name",
                format!(
                    "{:?}: a fleet name is 1 to 32 letters, digits, '_', '.' or '-'",
                    self.name
                ),
            );
        }
        if let Some(id) = &self.instance_id {
            if !valid_id(id) {
                c.err(
                    "cluster",
                    "instance_id",
                    format!("{id:?}: an instance id is 1 to 32 letters, digits, '_', '.' or '-'"),
                );
            }
        }
        if self.user.is_some() != self.password.is_some() {
            c.err(
                "cluster",
                "user",
                "give both user and password for etcd, or neither".into(),
            );
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            c.err(
                "cluster",
                "cert_file",
                "give both cert_file and key_file, or neither".into(),
            );
        }
        if self.lease_ttl_ms < 1000 {
            c.err(
                "cluster",
                "lease_ttl_ms",
                format!(
                    "{}: at least 1000 (etcd's leases count whole seconds)",
                    self.lease_ttl_ms
                ),
            );
        }
    }
}
