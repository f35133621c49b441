//! What a reload may change: the config, the users, the server groups and
//! their pools, as one [`Runtime`] value. A session takes the runtime
//! current at its login (its user entry holds its group), so swapping in a
//! new one never touches a session in flight.

use crate::errors::StartError;
use crate::frontend::Users;
use sextant_backend::{Group, Pool, PoolSettings, Role, Server};
use sextant_config::Config;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub struct UserEntry {
    pub name: String,
    pub password: String,
    pub require_tls: bool,
    /// Logs in with client_ed25519 instead of the listener's plugin.
    pub ed25519: bool,
    /// May KILL any user's sessions.
    pub connection_admin: bool,
    /// [routing] with this user's overrides; a reload or the admin
    /// port's SET changes it in place, for the user's open sessions too.
    pub policy: PolicyCell,
    pub backend_user: String,
    pub backend_password: String,
    pub group: Arc<Group>,
    /// The newest write of any session of this user, for read_your_writes
    /// with scope "user".
    pub latest_write: sextant_backend::gtid::Newest,
    /// On a sharded layout, the same per group of the layout (in its
    /// order): each group has its own primary and GTIDs, and one write
    /// over several groups is a write in each.
    pub shard_writes: Box<[sextant_backend::gtid::Newest]>,
    /// Most sessions at once (0: no limit), and how many there are.
    pub max_connections: usize,
    pub connections: std::sync::atomic::AtomicUsize,
    /// Commands this user's sessions sent (for /metrics).
    pub statements: std::sync::atomic::AtomicU64,
}

/// A sharded layout, ready to route by: the router and the server group
/// of each of its groups (in the layout's order).
pub struct Sharding {
    pub router: sextant_sharding::Router,
    pub groups: Vec<Arc<Group>>,
    /// `merge_memory_mb`, in bytes.
    pub merge_memory: usize,
    /// Each sequence's block of ids in hand.
    pub sequences: IdBlocks,
    /// Column lists of sharded tables, for INSERTs that name none.
    pub columns: sextant_sharding::columns::ColumnBook,
}

/// Each sequence's block of ids in hand: the next id, and the end. Taken
/// only when a sequence fills an INSERT's ids, so a lock is cheap here.
#[derive(Default)]
pub struct IdBlocks(std::sync::Mutex<std::collections::HashMap<String, (u64, u64)>>);

impl IdBlocks {
    /// `n` consecutive ids from the block in hand, if it has them.
    pub fn take_ids(&self, name: &str, n: u64) -> Option<u64> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let b = m.get_mut(name)?;
        if b.1.saturating_sub(b.0) < n {
            return None;
        }
        b.0 += n;
        Some(b.0 - n)
    }

    /// A new block in hand (what was left of the old one is not used).
    /// Sessions that found the block empty at the same moment each fetch
    /// one, and the counter hands them out in order; keeping the newest
    /// means ids given later by this sextant are never below ids it gave
    /// before (an older block arriving last is dropped, not reused).
    pub fn put_block(&self, name: &str, next: u64, end: u64) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match m.get_mut(name) {
            Some(b) if b.1 >= end => {}
            Some(b) => *b = (next, end),
            None => {
                m.insert(name.to_string(), (next, end));
            }
        }
    }
}

impl Sharding {
    /// Where statements that name no table of the layout go for a
    /// session in database `db`: its default group, if the layout gives
    /// one.
    pub fn default_group(&self, db: Option<&str>) -> Option<&Arc<Group>> {
        let db = db?.to_ascii_lowercase();
        let name = self.router.layout.default_group.get(&db)?;
        self.groups.get(self.router.layout.group_index(name)?)
    }
}

/// Everything the configuration decides, built from one config.
pub struct Runtime {
    pub config: Config,
    pub pool: Pool,
    pub users: HashMap<String, Arc<UserEntry>>,
    pub sharding: Option<Arc<Sharding>>,
    /// The networks whose connections start with a PROXY protocol header.
    pub proxy_from: crate::proxy_header::Trusted,
}

impl Runtime {
    /// Builds the runtime of `config`. With the `previous` runtime (a
    /// reload), a group whose settings did not change keeps its servers,
    /// their pools and health, and a user whose entry and group did not
    /// change keeps its entry (and the newest write its reads must see).
    pub fn build(config: Config, previous: Option<&Runtime>) -> Result<Runtime, StartError> {
        let mut pool = Pool::default();
        for (name, g) in &config.groups {
            let kept = previous.and_then(|p| {
                let same = p
                    .config
                    .groups
                    .get(name)
                    .is_some_and(|o| same_but_weights(o, g));
                same.then(|| p.pool.groups.get(name).cloned()).flatten()
            });
            let group = match kept {
                Some(group) => group,
                None => Arc::new(build_group(name, g)?),
            };
            pool.groups.insert(name.clone(), group);
        }
        let mut users = HashMap::new();
        let shard_groups = config.layout.as_ref().map_or(0, |l| l.groups.len());
        for u in &config.users {
            let gname = config.group_for(u);
            let group =
                pool.groups
                    .get(gname)
                    .cloned()
                    .ok_or_else(|| StartError::UnknownGroup {
                        user: u.name.clone(),
                        group: gname.to_string(),
                    })?;
            let policy = config.routing.policy().with(&u.routing);
            let ed25519 = u.auth_plugin == Some(sextant_config::UserAuthPlugin::Ed25519);
            let kept = previous.and_then(|p| p.users.get(&u.name)).filter(|e| {
                Arc::ptr_eq(&e.group, &group)
                    && e.password == u.password
                    && e.require_tls == u.require_tls
                    && e.backend_user == u.backend_user()
                    && e.backend_password == u.backend_password()
                    && e.max_connections == u.max_connections
                    && e.ed25519 == ed25519
                    && e.connection_admin == u.connection_admin
                    && e.shard_writes.len() == shard_groups
            });
            let entry = match kept {
                Some(e) => e.clone(),
                None => Arc::new(UserEntry {
                    name: u.name.clone(),
                    password: u.password.clone(),
                    require_tls: u.require_tls,
                    ed25519,
                    connection_admin: u.connection_admin,
                    policy: PolicyCell::new(policy),
                    latest_write: Default::default(),
                    shard_writes: (0..shard_groups).map(|_| Default::default()).collect(),
                    backend_user: u.backend_user().to_string(),
                    backend_password: u.backend_password().to_string(),
                    group,
                    max_connections: u.max_connections,
                    connections: Default::default(),
                    statements: Default::default(),
                }),
            };
            users.insert(u.name.clone(), entry);
        }
        let sharding = match &config.layout {
            Some(layout) => {
                let mut groups = Vec::new();
                for name in &layout.groups {
                    groups.push(pool.groups.get(name).cloned().ok_or_else(|| {
                        StartError::UnknownGroup {
                            user: "[sharding]".into(),
                            group: name.clone(),
                        }
                    })?);
                }
                Some(Arc::new(Sharding {
                    router: sextant_sharding::Router::new(layout.clone()),
                    groups,
                    merge_memory: config
                        .sharding
                        .as_ref()
                        .map_or(64, |s| s.merge_memory_mb)
                        .saturating_mul(1 << 20) as usize,
                    sequences: Default::default(),
                    columns: Default::default(),
                }))
            }
            None => None,
        };
        let proxy_from = crate::proxy_header::Trusted::new(&config.proxy.proxy_protocol_from);
        Ok(Runtime {
            config,
            pool,
            users,
            sharding,
            proxy_from,
        })
    }
}

/// A routing policy that can change while sessions read it: packed into
/// two atomics, read with two relaxed loads per statement (no lock).
pub struct PolicyCell {
    flags: std::sync::atomic::AtomicU64,
    causal_wait_ms: std::sync::atomic::AtomicU64,
}

const BALANCES: [sextant_config::Balance; 4] = [
    sextant_config::Balance::RoundRobin,
    sextant_config::Balance::Weighted,
    sextant_config::Balance::LeastOutstanding,
    sextant_config::Balance::LeastLatency,
];
const CONSISTENCIES: [sextant_config::Consistency; 4] = [
    sextant_config::Consistency::Eventual,
    sextant_config::Consistency::ReadYourWrites,
    sextant_config::Consistency::Monotonic,
    sextant_config::Consistency::Strong,
];
const SCOPES: [sextant_config::ConsistencyScope; 2] = [
    sextant_config::ConsistencyScope::Session,
    sextant_config::ConsistencyScope::User,
];

impl PolicyCell {
    pub fn new(p: sextant_config::RoutingPolicy) -> PolicyCell {
        let c = PolicyCell {
            flags: Default::default(),
            causal_wait_ms: Default::default(),
        };
        c.store(p);
        c
    }

    fn pack(p: &sextant_config::RoutingPolicy) -> u64 {
        let index = |i: Option<usize>| i.unwrap_or(0) as u64;
        (p.primary_preferred as u64)
            | (p.read_primary_percent as u64) << 8
            | index(BALANCES.iter().position(|b| *b == p.balance)) << 16
            | (p.read_only_transactions_on_replicas as u64) << 24
            | index(CONSISTENCIES.iter().position(|c| *c == p.consistency)) << 32
            | index(SCOPES.iter().position(|c| *c == p.consistency_scope)) << 40
    }

    pub fn store(&self, p: sextant_config::RoutingPolicy) {
        use std::sync::atomic::Ordering::Relaxed;
        self.causal_wait_ms.store(p.causal_wait_ms, Relaxed);
        self.flags.store(Self::pack(&p), Relaxed);
    }

    #[inline]
    pub fn load(&self) -> sextant_config::RoutingPolicy {
        use std::sync::atomic::Ordering::Relaxed;
        let f = self.flags.load(Relaxed);
        let byte = |shift: u32| ((f >> shift) & 0xff) as usize;
        sextant_config::RoutingPolicy {
            primary_preferred: f & 1 != 0,
            read_primary_percent: byte(8) as u8,
            balance: BALANCES[byte(16) % BALANCES.len()],
            read_only_transactions_on_replicas: byte(24) != 0,
            consistency: CONSISTENCIES[byte(32) % CONSISTENCIES.len()],
            consistency_scope: SCOPES[byte(40) % SCOPES.len()],
            causal_wait_ms: self.causal_wait_ms.load(Relaxed),
        }
    }
}

impl UserEntry {
    /// The user's routing policy now.
    #[inline]
    pub fn policy(&self) -> sextant_config::RoutingPolicy {
        self.policy.load()
    }
}

impl Runtime {
    /// Gives every user entry the routing policy the config says (a kept
    /// entry may have had another: its sessions follow at their next
    /// statement).
    pub fn apply_policies(&self) {
        for u in &self.config.users {
            if let Some(e) = self.users.get(&u.name) {
                e.policy
                    .store(self.config.routing.policy().with(&u.routing));
            }
        }
    }

    /// Gives the servers of every group the read weights the config says
    /// (a kept group may have had other weights: they change in place,
    /// for every session at its next read).
    pub fn apply_weights(&self) {
        for (name, g) in &self.config.groups {
            let Some(group) = self.pool.groups.get(name) else {
                continue;
            };
            group.set_primary_weight(g.primary_weight);
            for (m, r) in group.members.iter().skip(1).zip(&g.replicas) {
                m.set_weight(r.weight);
            }
        }
    }
}

/// Whether two group settings differ at most in read weights, which a
/// running group can take on without new servers.
fn same_but_weights(a: &sextant_config::Group, b: &sextant_config::Group) -> bool {
    if a.replicas.len() != b.replicas.len() {
        return false;
    }
    let mut b = b.clone();
    b.primary_weight = a.primary_weight;
    for (rb, ra) in b.replicas.iter_mut().zip(&a.replicas) {
        rb.weight = ra.weight;
    }
    *a == b
}

fn build_group(name: &str, g: &sextant_config::Group) -> Result<Group, StartError> {
    let tls = match g.tls {
        true => Some(
            sextant_net::tls::client_config(g.tls_ca.as_deref()).map_err(|e| StartError::Tls {
                what: format!("groups.{name}"),
                source: e,
            })?,
        ),
        false => None,
    };
    let target = |addr: &str| -> Result<Option<sextant_backend::TlsTarget>, StartError> {
        match &tls {
            Some(config) => Ok(Some(sextant_backend::TlsTarget {
                verified: g.tls_ca.is_some(),
                config: config.clone(),
                name: sextant_net::tls::server_name(addr).map_err(|e| StartError::Tls {
                    what: format!("groups.{name}"),
                    source: e,
                })?,
            })),
            None => Ok(None),
        }
    };
    let mut settings = PoolSettings {
        max: g.pool_max,
        min: g.pool_min,
        connect_timeout: Duration::from_millis(g.connect_timeout_ms),
        idle_timeout: Duration::from_millis(g.idle_timeout_ms),
        max_lifetime: Duration::from_millis(g.max_lifetime_ms),
        health_check_idle: Duration::from_millis(g.health_check_idle_ms),
        wait: Duration::from_millis(g.pool_wait_ms),
        max_prepared: g.max_prepared_per_connection,
        tls: None,
        server_key: match &g.server_public_key {
            Some(path) => Some(
                sextant_config::files::read_bounded(
                    std::path::Path::new(path),
                    sextant_config::files::MAX_SECRET_BYTES,
                )
                .map_err(|e| StartError::Tls {
                    what: format!("groups.{name}.server_public_key"),
                    source: sextant_net::NetError::Pem {
                        path: path.clone(),
                        what: e.to_string(),
                    },
                })?
                .into(),
            ),
            None => None,
        },
        pipeline_depth: g.pipeline(),
        pipeline_connections: g.pipeline_connections(),
        query_timeout: (g.query_timeout_ms > 0).then(|| Duration::from_millis(g.query_timeout_ms)),
    };
    settings.tls = target(&g.primary.0)?;
    let primary = Arc::new(Server::new(
        &g.primary.0,
        name,
        Role::Primary,
        1,
        settings.clone(),
    ));
    let mut replicas = Vec::new();
    for r in &g.replicas {
        settings.tls = target(&r.addr.0)?;
        replicas.push(Arc::new(Server::new(
            &r.addr.0,
            name,
            Role::Replica,
            r.weight,
            settings.clone(),
        )));
    }
    let mut group = Group::with_topology(
        name,
        primary,
        replicas,
        g.primary_weight,
        g.topology,
        Duration::from_millis(g.primary_wait_ms()),
    );
    group.multi_writer = g.galera_multi_writer;
    group
        .ha
        .set_auto(g.failover == sextant_config::FailoverMode::Auto);
    Ok(group)
}

impl Users for Runtime {
    fn password(&self, user: &str) -> Option<&str> {
        self.users.get(user).map(|u| u.password.as_str())
    }
    fn require_tls(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(|u| u.require_tls)
    }
    fn ed25519(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(|u| u.ed25519)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_fetched_earlier_but_put_later_does_not_lower_the_ids() {
        let b = IdBlocks::default();
        assert_eq!(b.take_ids("s", 1), None);
        // Two sessions found it empty: the counter gave 1..101 then 101..201,
        // and the newer block arrived first.
        b.put_block("s", 102, 201);
        b.put_block("s", 2, 101);
        assert_eq!(b.take_ids("s", 3), Some(102));
        assert_eq!(b.take_ids("s", 1), Some(105));
        assert_eq!(b.take_ids("s", 200), None);
        b.put_block("s", 202, 301);
        assert_eq!(b.take_ids("s", 1), Some(202));
    }

    const BASE: &str = r#"
[proxy]
listen = "127.0.0.1:16033"
default_group = "a"
[[users]]
name = "app"
password = "apppass"
[[users]]
name = "other"
password = "otherpass"
default_group = "b"
[groups.a]
primary = "127.0.0.1:23307"
replicas = ["127.0.0.1:23308"]
[groups.b]
primary = "127.0.0.1:23317"
"#;

    fn config(text: &str) -> Config {
        Config::parse(text, "test.toml").expect("config")
    }

    #[test]
    fn a_policy_cell_gives_back_what_it_was_given() {
        use sextant_config::*;
        for balance in BALANCES {
            for consistency in CONSISTENCIES {
                for scope in SCOPES {
                    let p = RoutingPolicy {
                        primary_preferred: balance == Balance::Weighted,
                        read_primary_percent: 37,
                        balance,
                        read_only_transactions_on_replicas: scope == ConsistencyScope::User,
                        consistency,
                        consistency_scope: scope,
                        causal_wait_ms: 1234,
                    };
                    assert_eq!(PolicyCell::new(p).load(), p);
                }
            }
        }
    }

    #[test]
    fn a_rebuild_keeps_unchanged_groups_and_users() {
        let old = Runtime::build(config(BASE), None).expect("build");
        let changed = BASE.replace("127.0.0.1:23317", "127.0.0.1:23327");
        let new = Runtime::build(config(&changed), Some(&old)).expect("rebuild");
        assert!(Arc::ptr_eq(&old.pool.groups["a"], &new.pool.groups["a"]));
        assert!(!Arc::ptr_eq(&old.pool.groups["b"], &new.pool.groups["b"]));
        assert_eq!(&*new.pool.groups["b"].members[0].addr, "127.0.0.1:23327");
        // app's group is unchanged: its entry (and its newest write) stays.
        assert!(Arc::ptr_eq(&old.users["app"], &new.users["app"]));
        // other's group was rebuilt: a new entry on the new group.
        assert!(!Arc::ptr_eq(&old.users["other"], &new.users["other"]));
        assert!(Arc::ptr_eq(
            &new.users["other"].group,
            &new.pool.groups["b"]
        ));
        // A changed password makes a new entry too.
        let changed = BASE.replace("apppass", "newpass");
        let newer = Runtime::build(config(&changed), Some(&new)).expect("rebuild");
        assert!(!Arc::ptr_eq(&new.users["app"], &newer.users["app"]));
        assert!(Arc::ptr_eq(&new.pool.groups["a"], &newer.pool.groups["a"]));
        // Weights change in place: the group is kept, its servers take the
        // new weights once applied (not before: a refused reload changes
        // nothing).
        let weighted = BASE.replace(
            "replicas = [\"127.0.0.1:23308\"]",
            "replicas = [{ addr = \"127.0.0.1:23308\", weight = 7 }]\nprimary_weight = 2",
        );
        let w = Runtime::build(config(&weighted), Some(&newer)).expect("rebuild");
        assert!(Arc::ptr_eq(&newer.pool.groups["a"], &w.pool.groups["a"]));
        assert_eq!(w.pool.groups["a"].members[1].weight(), 1);
        w.apply_weights();
        assert_eq!(w.pool.groups["a"].members[1].weight(), 7);
        assert_eq!(w.pool.groups["a"].primary_weight(), 2);
        // Another replica is another group.
        let more = weighted.replace("weight = 7 }]", "weight = 7 }, \"127.0.0.1:23309\"]");
        let m = Runtime::build(config(&more), Some(&w)).expect("rebuild");
        assert!(!Arc::ptr_eq(&w.pool.groups["a"], &m.pool.groups["a"]));
    }
}
