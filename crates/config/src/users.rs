//! `[[users]]`: client accounts, their server accounts and per-user settings.

use crate::check::Checker;
use crate::RoutingOverride;
use crate::{is_native_hash, Config};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    /// What clients log in with: clear, a mysql_native_password hash
    /// (`*` and 40 hex digits, as in mysql.user), or a reference to an
    /// environment variable or a file (see [`secret`]).
    #[serde(default, deserialize_with = "crate::secrets::secret")]
    pub password: String,
    /// What the proxy presents to the servers (default: the same).
    #[serde(default)]
    pub backend_user: Option<String>,
    #[serde(default, deserialize_with = "crate::secrets::optional_secret")]
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

/// The users: names, hashes, groups and TLS, against the rest of `cfg`.
pub(crate) fn check(users: &[User], cfg: &Config, c: &mut Checker) {
    let tls = cfg.proxy.tls_cert.is_some();
    let mut seen = std::collections::BTreeSet::new();
    for (i, u) in users.iter().enumerate() {
        if u.name.is_empty() {
            c.at("users", i, "name", "a user name must not be empty".into());
        }
        if !seen.insert(&u.name) {
            c.at(
                "users",
                i,
                "name",
                format!("user {:?} is defined twice", u.name),
            );
        }
        if let Some(g) = &u.default_group {
            if !cfg.groups.contains_key(g) {
                c.at(
                    "users",
                    i,
                    "default_group",
                    format!("user {:?} names group {g:?}, which is not defined", u.name),
                );
            }
        }
    }
    for (i, u) in users.iter().enumerate() {
        if !is_native_hash(&u.password) {
            continue;
        }
        if u.backend_password.is_none() {
            c.at(
                "users",
                i,
                "password",
                format!("user {:?}: a mysql_native_password hash checks clients' logins, but sextant cannot log in to the servers with it; give backend_password (clear, {{ env = ... }} or {{ file = ... }})", u.name),
            );
        } else if u.backend_password.as_deref().is_some_and(is_native_hash) {
            c.at(
                "users",
                i,
                "backend_password",
                format!("user {:?}: sextant logs in to the servers with backend_password, so it must be the password itself, not its hash", u.name),
            );
        }
        if u.auth_plugin.is_some() {
            c.at(
                "users",
                i,
                "auth_plugin",
                format!("user {:?}: client_ed25519 needs the clear password, not a mysql_native_password hash", u.name),
            );
        }
    }
    if let Some((i, u)) = users
        .iter()
        .enumerate()
        .find(|(_, u)| u.require_tls && !tls)
    {
        c.at(
            "users",
            i,
            "require_tls",
            format!(
                "user {:?} requires TLS, but [proxy] has no tls_cert/tls_key",
                u.name
            ),
        );
    }
}
