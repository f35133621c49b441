//! What every session shares: configuration, users, the pool, counters.

use crate::frontend::Users;
use sextant_admin::Counters;
use sextant_backend::{Group, Pool};
use sextant_config::Config;
use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

pub struct UserEntry {
    pub name: String,
    pub password: String,
    pub require_tls: bool,
    /// [routing] with this user's overrides.
    pub policy: sextant_config::RoutingPolicy,
    pub backend_user: String,
    pub backend_password: String,
    pub group: Arc<Group>,
    /// The newest write of any session of this user (packed GTID, and its
    /// server id), for read_your_writes with scope "user".
    pub latest_write: std::sync::atomic::AtomicU64,
    pub latest_write_server: AtomicU32,
    /// MySQL: that write's source uuid (high, low halves); 0 for MariaDB.
    pub latest_write_uuid: [std::sync::atomic::AtomicU64; 2],
}

pub struct Shared {
    pub config: Config,
    pub pool: Pool,
    pub users: HashMap<String, Arc<UserEntry>>,
    pub counters: Counters,
    pub server_version: String,
    pub next_conn_id: AtomicU32,
    pub auth: crate::frontend::AuthSetup,
    pub admin_auth: crate::frontend::AuthSetup,
}

impl Users for Shared {
    fn password(&self, user: &str) -> Option<&str> {
        self.users.get(user).map(|u| u.password.as_str())
    }
    fn require_tls(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(|u| u.require_tls)
    }
}

/// The admin port's single user.
pub struct AdminUsers {
    pub user: String,
    pub password: String,
}

impl Users for AdminUsers {
    fn password(&self, user: &str) -> Option<&str> {
        (user == self.user).then_some(self.password.as_str())
    }
    fn require_tls(&self, _: &str) -> bool {
        false
    }
}
