//! Several sextant instances as one fleet, through etcd.
//!
//! Each instance registers itself under a lease (its record disappears a
//! few seconds after it stops renewing, or at once when it leaves), and
//! watches the fleet's intended settings: the admin changes and pushed
//! configs any instance wrote, each with a compare-and-swap on the
//! revision its writer had seen, so that a concurrent change is refused
//! rather than silently overwritten. What the monitors observe is never
//! written here: each instance observes for itself.
//!
//! The connection to etcd is not on any statement's path. When etcd is
//! unreachable an instance keeps serving with what it last applied,
//! refuses changes that need etcd, and catches up from the last revision
//! it saw when etcd answers again.

mod error;
mod failover;
pub mod id;
pub mod keys;
mod membership;
pub mod pushed;
pub mod seal;
mod tls;
mod watch;

pub use error::FleetError;
pub use failover::Term;
pub use keys::{Intent, Keys};
pub use pushed::PushedConfig;
pub use seal::Seal;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, Txn, TxnOp, TxnOpResponse};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How to reach etcd and who this instance is.
#[derive(Debug, Clone)]
pub struct Settings {
    pub endpoints: Vec<String>,
    pub name: String,
    pub id: String,
    pub user: Option<(String, String)>,
    pub ca_file: Option<String>,
    pub cert_and_key: Option<(String, String)>,
    pub lease_ttl: Duration,
    /// The fleet's secret: what members seal their records and intents
    /// with.
    pub seal: Seal,
}

impl Settings {
    /// From `[cluster]`, with the instance id already settled.
    pub fn new(c: &sextant_config::Cluster, id: String) -> Settings {
        Settings {
            endpoints: c.etcd.clone(),
            name: c.name.clone(),
            id,
            user: c.user.clone().zip(c.password.clone()),
            ca_file: c.ca_file.clone(),
            cert_and_key: c.cert_file.clone().zip(c.key_file.clone()),
            lease_ttl: Duration::from_millis(c.lease_ttl_ms),
            seal: Seal::new(&c.secret),
        }
    }
}

/// What an instance says of itself now (asked once per renewal).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub listen: String,
    pub admin: String,
    pub http: Option<String>,
    pub sessions: u64,
    /// Statements since start (the record carries the rate).
    pub statements: u64,
}

/// One instance's record, as every instance sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Member {
    pub id: String,
    /// The high byte of its connection ids (0: none claimed).
    #[serde(default)]
    pub slot: u8,
    pub version: String,
    pub host: String,
    pub pid: u32,
    pub listen: String,
    pub admin: String,
    pub http: Option<String>,
    pub started_ms: u64,
    /// The revision of the last intent this instance applied.
    pub applied_revision: i64,
    /// The last intent it refused, and why.
    pub refused: Option<String>,
    pub sessions: u64,
    pub statements_per_s: f64,
    /// The revision of the pushed config it runs (0: its own file's).
    #[serde(default)]
    pub config_revision: i64,
    /// Keys of the config it runs that take effect only at a restart.
    #[serde(default)]
    pub needs_restart: Vec<String>,
    /// When it last renewed its record (its own clock).
    pub updated_ms: u64,
}

/// An intent as it changed in etcd (value None: removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub intent: Intent,
    pub value: Option<String>,
    pub revision: i64,
}

/// Whether etcd answers, as this instance last found.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreState {
    pub reachable: bool,
    /// Since when (ms since the epoch) it is as it is.
    pub since_ms: u64,
    pub error: Option<String>,
}

struct State {
    members: Vec<Member>,
    store: StoreState,
    /// Each intent's value and the revision it last changed at, as this
    /// instance's watch delivered them: the base of its compare-and-swap.
    seen: BTreeMap<Intent, (String, i64)>,
    applied_revision: i64,
    refused: Option<String>,
    config_revision: i64,
    needs_restart: Vec<String>,
    slot: u8,
    /// Keys of member records and intents found without a valid seal.
    ignored: Vec<String>,
}

pub struct Fleet {
    settings: Settings,
    keys: Keys,
    client: tokio::sync::Mutex<Option<Client>>,
    state: parking_lot::Mutex<State>,
    applied: tokio::sync::watch::Sender<i64>,
    lease: parking_lot::Mutex<Option<i64>>,
    /// When a renewal that etcd confirmed was sent (the lease lives at
    /// least its time to live from then).
    lease_sent: parking_lot::Mutex<Option<std::time::Instant>>,
    /// When the member list was last asked for.
    members_asked: parking_lot::Mutex<Option<std::time::Instant>>,
    /// Set by [`Fleet::leave`]: the record is not renewed again.
    left: std::sync::atomic::AtomicBool,
    /// Whether this instance's record holds its id in etcd: None until
    /// known; Some(Err(holder)) while another live process holds it.
    id_claim: tokio::sync::watch::Sender<Option<Result<(), String>>>,
    /// etcd refused the client's auth token (expired, or etcd restarted
    /// and forgot it): the next call connects again, which logs in anew.
    reauth: std::sync::atomic::AtomicBool,
    started_ms: u64,
}

/// A PEM file of `[cluster]` (`what`), read and checked to hold a `kind`
/// block, so that a wrong or missing file is named as such rather than
/// as a "transport error" when the TLS handshake fails.
fn pem_file(path: &str, what: &str, kind: &str) -> Result<Vec<u8>, FleetError> {
    let pem = std::fs::read(path)
        .map_err(|e| FleetError::Tls(format!("[cluster] {what} {path}: {e}")))?;
    let text = String::from_utf8_lossy(&pem);
    if !text.contains("-----BEGIN ") || !text.contains(&format!("{kind}-----")) {
        return Err(FleetError::Tls(format!(
            "[cluster] {what} {path}: no PEM {kind} in it"
        )));
    }
    Ok(pem)
}

/// An error and every cause under it: etcd's client reports a failed TLS
/// handshake as "transport error", the reason (which certificate, why)
/// only in its sources.
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out += ": ";
            out += &s_text;
        }
        source = s.source();
    }
    out
}

/// Whether etcd's answer says the client's auth token is no longer valid
/// (simple tokens are forgotten when etcd restarts; JWTs expire), which a
/// new login cures.
fn token_refused(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    r.contains("invalid auth token")
        || r.contains("token is expired")
        || r.contains("token expired")
        || r.contains("auth token is not")
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Fleet {
    /// Joins the fleet: registers this instance and starts watching the
    /// intents, on the current tokio runtime. Every intent (those already
    /// there first) arrives on the returned channel, in revision order;
    /// tell [`Fleet::done`] once each is applied.
    pub fn start(
        settings: Settings,
        report: Arc<dyn Fn() -> Report + Send + Sync>,
    ) -> (Arc<Fleet>, tokio::sync::mpsc::UnboundedReceiver<Change>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let fleet = Arc::new(Fleet::new(settings));
        tokio::spawn(membership::run(fleet.clone(), report));
        tokio::spawn(watch::run(fleet.clone(), tx));
        (fleet, rx)
    }

    /// The fleet's store without joining it (no record, no watch): for a
    /// command line that pushes or reads the fleet's config.
    pub fn outside(settings: Settings) -> Fleet {
        Fleet::new(settings)
    }

    fn new(settings: Settings) -> Fleet {
        Fleet {
            keys: Keys::new(&settings.name),
            settings,
            client: tokio::sync::Mutex::new(None),
            reauth: std::sync::atomic::AtomicBool::new(false),
            id_claim: tokio::sync::watch::channel(None).0,
            state: parking_lot::Mutex::new(State {
                members: Vec::new(),
                store: StoreState {
                    reachable: false,
                    since_ms: now_ms(),
                    error: Some("not yet connected".into()),
                },
                seen: BTreeMap::new(),
                applied_revision: 0,
                refused: None,
                config_revision: 0,
                needs_restart: Vec::new(),
                slot: 0,
                ignored: Vec::new(),
            }),
            applied: tokio::sync::watch::channel(0).0,
            lease: parking_lot::Mutex::new(None),
            lease_sent: parking_lot::Mutex::new(None),
            members_asked: parking_lot::Mutex::new(None),
            left: Default::default(),
            started_ms: now_ms(),
        }
    }

    pub fn id(&self) -> &str {
        &self.settings.id
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub(crate) fn id_held(&self) {
        self.id_claim.send_replace(Some(Ok(())));
    }

    pub(crate) fn id_conflict(&self, holder: &str) {
        let first = !matches!(&*self.id_claim.borrow(), Some(Err(_)));
        if first {
            tracing::error!(id = %self.settings.id, holder, "another live process holds this instance's id in the fleet; this one does not register (each instance needs its own id: its own state_dir or instance_id)");
        }
        self.id_claim.send_replace(Some(Err(holder.to_string())));
    }

    /// Waits until this instance's record holds its id in etcd, for at
    /// most `within` (etcd unreachable, or a crashed predecessor's record
    /// still under its lease until that expires). Err: why it does not.
    pub async fn claim_id(&self, within: Duration) -> Result<(), FleetError> {
        let mut rx = self.id_claim.subscribe();
        let held = tokio::time::timeout(within, rx.wait_for(|c| matches!(c, Some(Ok(())))))
            .await
            .is_ok_and(|r| r.is_ok());
        if held {
            return Ok(());
        }
        let why = match &*self.id_claim.borrow() {
            Some(Err(holder)) => format!(
                "instance id {:?} is held in the fleet by a live process ({holder}); each instance needs its own id (its own [cluster] state_dir, or a distinct instance_id)",
                self.settings.id
            ),
            _ => format!(
                "could not claim instance id {:?} in the fleet's etcd within {} s ({}); an instance of a fleet takes clients only once its id is claimed there",
                self.settings.id,
                within.as_secs(),
                self.store().error.unwrap_or_else(|| "no answer".into())
            ),
        };
        Err(FleetError::InstanceId(why))
    }

    /// Keys of etcd values under the fleet's prefix that no member sealed
    /// (written by someone without the fleet's secret): ignored.
    pub fn ignored(&self) -> Vec<String> {
        self.state.lock().ignored.clone()
    }

    /// Notes a value found without a valid seal (logged once per key).
    pub(crate) fn note_ignored(&self, key: &str, present: bool) {
        let mut st = self.state.lock();
        let known = st.ignored.iter().any(|k| k == key);
        match (present, known) {
            (true, false) => {
                tracing::warn!(key, "a value in the fleet's etcd prefix is not sealed with the fleet's secret: ignored (whoever wrote it does not hold [cluster] secret)");
                st.ignored.push(key.to_string());
            }
            (false, true) => st.ignored.retain(|k| k != key),
            _ => {}
        }
    }

    /// The credential peers log in to each other's admin port with,
    /// derived from the fleet's secret (the `[admin]` login is never sent
    /// to a peer).
    pub fn peer_password(&self) -> String {
        self.settings.seal.derive("peer admin login")
    }

    /// The instances whose leases are alive, by id (this one included once
    /// it registered).
    pub fn members(&self) -> Vec<Member> {
        self.state.lock().members.clone()
    }

    /// Whether this instance's lease is surely alive: etcd confirmed a
    /// renewal sent less than its time to live ago. Once it may have
    /// expired, other instances may take this one for gone and settle its
    /// distributed transactions, so it decides no commit of its own.
    pub fn holds_lease(&self) -> bool {
        self.lease_sent
            .lock()
            .is_some_and(|t| t.elapsed() < self.settings.lease_ttl)
    }

    pub(crate) fn lease_confirmed(&self, sent: std::time::Instant) {
        *self.lease_sent.lock() = Some(sent);
    }

    /// Whether instance `id` is known gone as of `since`: etcd answers,
    /// and the member list, asked for after `since`, has no record of it
    /// under a lease (its lease expired, or it never had one: an instance
    /// decides no commit before its record is there, see
    /// [`Fleet::holds_lease`]). Without an answer from etcd nobody is
    /// known gone.
    pub fn is_gone(&self, id: &str, since: std::time::Instant) -> bool {
        if self.members_asked.lock().is_none_or(|t| t <= since) {
            return false;
        }
        let st = self.state.lock();
        st.store.reachable && id != self.settings.id && !st.members.iter().any(|m| m.id == id)
    }

    pub(crate) fn members_asked(&self, at: std::time::Instant) {
        *self.members_asked.lock() = Some(at);
    }

    pub fn store(&self) -> StoreState {
        self.state.lock().store.clone()
    }

    pub fn applied_revision(&self) -> i64 {
        self.state.lock().applied_revision
    }

    /// Every intent this instance's watch delivered, with its value and
    /// revision (what a reload applies again on top of the file).
    pub fn intents(&self) -> Vec<(Intent, String, i64)> {
        self.state
            .lock()
            .seen
            .iter()
            .map(|(i, (v, r))| (i.clone(), v.clone(), *r))
            .collect()
    }

    /// The value and revision of one intent, as this instance saw it.
    pub fn intent(&self, i: &Intent) -> Option<(String, i64)> {
        self.state.lock().seen.get(i).cloned()
    }

    /// Writes an intent for every instance, if it is still at revision
    /// `base` (None: the revision this instance last saw of it; 0: not
    /// there). Returns the revision it was written at.
    pub async fn set(
        &self,
        intent: &Intent,
        value: &str,
        base: Option<i64>,
    ) -> Result<i64, FleetError> {
        let key = self.keys.intent(intent);
        let seen = match base {
            Some(b) => b,
            None => self.intent(intent).map_or(0, |(_, r)| r),
        };
        let sealed = self.settings.seal.seal(&key, value);
        let txn = Txn::new()
            .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, seen)])
            .and_then([TxnOp::put(key.as_str(), sealed, None)])
            .or_else([TxnOp::get(key.as_str(), None)]);
        self.cas(txn, intent, seen).await
    }

    /// Runs a compare-and-swap transaction whose failure branch reads the
    /// intent: its revision then says who won.
    async fn cas(&self, txn: Txn, intent: &Intent, seen: i64) -> Result<i64, FleetError> {
        let mut client = self.client().await?;
        let resp = client
            .txn(txn)
            .await
            .map_err(|e| self.unreachable(causes(&e)))?;
        self.reachable();
        if !resp.succeeded() {
            let current = resp
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.mod_revision()),
                    _ => None,
                })
                .unwrap_or(0);
            return Err(FleetError::Conflict {
                intent: intent.to_string(),
                seen,
                current,
            });
        }
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// An intent's value and revision as etcd has it now (not as this
    /// instance last saw it).
    pub async fn get(&self, intent: &Intent) -> Result<Option<(String, i64)>, FleetError> {
        let key = self.keys.intent(intent);
        Ok(self
            .get_opened(&key)
            .await?
            .and_then(|(v, rev)| v.map(|v| (v, rev))))
    }

    /// A key's value as etcd has it now, opened with the fleet's seal
    /// (None inside: there, but not sealed by a member, and noted as
    /// ignored), and its revision.
    pub(crate) async fn get_opened(
        &self,
        key: &str,
    ) -> Result<Option<(Option<String>, i64)>, FleetError> {
        let mut client = self.client().await?;
        let resp = client
            .get(key, None)
            .await
            .map_err(|e| self.unreachable(causes(&e)))?;
        self.reachable();
        Ok(resp.kvs().first().map(|kv| {
            let value = self.settings.seal.open(key, kv.value()).map(str::to_string);
            self.note_ignored(key, value.is_none());
            (value, kv.mod_revision())
        }))
    }

    /// Stores a config for every instance, if the fleet's config is still
    /// at revision `base` (0: none pushed yet). The routing keys set since
    /// (`SET` on an admin port) go with the same write: the pushed file
    /// says what they are now. Returns the revision it was stored at.
    pub async fn push_config(&self, config: &PushedConfig, base: i64) -> Result<i64, FleetError> {
        let key = self.keys.intent(&Intent::Config);
        let routing = self.keys.intent(&Intent::Routing(String::new()));
        let txn = Txn::new()
            .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, base)])
            .and_then([
                TxnOp::put(
                    key.as_str(),
                    self.settings.seal.seal(&key, &config.encode()),
                    None,
                ),
                TxnOp::delete(
                    routing.as_str(),
                    Some(etcd_client::DeleteOptions::new().with_prefix()),
                ),
            ])
            .or_else([TxnOp::get(key.as_str(), None)]);
        self.cas(txn, &Intent::Config, base).await
    }

    /// Waits until this instance applied the intents up to `revision`.
    pub async fn wait_applied(&self, revision: i64, timeout: Duration) -> bool {
        let mut rx = self.applied.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= revision))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// This instance's connection-id slot (0: none claimed).
    pub fn slot(&self) -> u8 {
        self.state.lock().slot
    }

    /// The live instance whose connection ids carry `slot`.
    pub fn member_of_slot(&self, slot: u8) -> Option<Member> {
        self.state
            .lock()
            .members
            .iter()
            .find(|m| m.slot == slot)
            .cloned()
    }

    /// Claims a connection-id slot (1-255) no live instance holds, the
    /// one this instance held before if it is still free, under the
    /// membership lease.
    pub async fn claim_slot(&self) -> Result<u8, FleetError> {
        let mut c = self.client().await?;
        let fail = |e: etcd_client::Error| self.unreachable(causes(&e));
        for _ in 0..20 {
            let lease = self.lease_id(&mut c).await?;
            let held = c
                .get(
                    self.keys.slots(),
                    Some(etcd_client::GetOptions::new().with_prefix()),
                )
                .await
                .map_err(fail)?;
            let mut taken = [false; 256];
            let mut mine = None;
            for kv in held.kvs() {
                let key = String::from_utf8_lossy(kv.key());
                let Some(n) = key.rsplit('/').next().and_then(|n| n.parse::<u8>().ok()) else {
                    continue;
                };
                taken[n as usize] = true;
                if kv.value() == self.settings.id.as_bytes() {
                    mine = Some(n);
                }
            }
            let Some(n) = mine.or_else(|| (1..=255u8).find(|n| !taken[*n as usize])) else {
                return Err(FleetError::InstanceId(
                    "all 255 connection-id slots are held by live instances".into(),
                ));
            };
            if self.hold_slot(&mut c, n, lease).await.map_err(fail)? {
                self.state.lock().slot = n;
                return Ok(n);
            }
        }
        Err(FleetError::InstanceId(
            "could not claim a connection-id slot: other instances kept taking the free ones"
                .into(),
        ))
    }

    /// Puts slot `n` under `lease` if it is this instance's or free.
    async fn hold_slot(
        &self,
        c: &mut Client,
        n: u8,
        lease: i64,
    ) -> Result<bool, etcd_client::Error> {
        let key = self.keys.slot(n);
        let put = || {
            TxnOp::put(
                key.as_str(),
                self.settings.id.as_str(),
                Some(etcd_client::PutOptions::new().with_lease(lease)),
            )
        };
        let ours = Txn::new()
            .when([Compare::value(
                key.as_str(),
                CompareOp::Equal,
                self.settings.id.as_str(),
            )])
            .and_then([put()]);
        if c.txn(ours).await?.succeeded() {
            return Ok(true);
        }
        let free = Txn::new()
            .when([Compare::version(key.as_str(), CompareOp::Equal, 0)])
            .and_then([put()]);
        Ok(c.txn(free).await?.succeeded())
    }

    /// The membership lease (granted now if there is none).
    async fn lease_id(&self, c: &mut Client) -> Result<i64, FleetError> {
        if let Some(id) = *self.lease.lock() {
            return Ok(id);
        }
        let secs = self.settings.lease_ttl.as_secs().max(1) as i64;
        let id = c
            .lease_grant(secs, None)
            .await
            .map_err(|e| self.unreachable(causes(&e)))?
            .id();
        *self.lease.lock() = Some(id);
        Ok(id)
    }

    /// The pushed config this instance runs now (its revision; 0: its own
    /// file's), and the keys of it that wait for a restart.
    pub fn running_config(&self, revision: i64, needs_restart: Vec<String>) {
        let mut st = self.state.lock();
        st.config_revision = revision;
        st.needs_restart = needs_restart;
    }

    /// The intent of `revision` is applied here (or refused, and why).
    pub fn done(&self, revision: i64, refused: Option<String>) {
        {
            let mut st = self.state.lock();
            st.applied_revision = st.applied_revision.max(revision);
            if refused.is_some() {
                st.refused = refused;
            }
        }
        self.applied.send_if_modified(|r| {
            let newer = revision > *r;
            if newer {
                *r = revision;
            }
            newer
        });
    }

    /// Leaves the fleet at once (revokes the lease: the record goes now,
    /// not when the lease would have expired).
    pub async fn leave(&self) {
        self.left.store(true, std::sync::atomic::Ordering::Relaxed);
        let lease = self.lease.lock().take();
        if let (Some(id), Ok(mut c)) = (lease, self.client().await) {
            let _ = tokio::time::timeout(Duration::from_secs(1), c.lease_revoke(id)).await;
        }
    }

    fn endpoints(&self) -> String {
        self.settings.endpoints.join(",")
    }

    fn unreachable(&self, reason: String) -> FleetError {
        if token_refused(&reason) {
            self.reauth.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let reason = match tls::advice(
            &reason,
            self.settings.ca_file.as_deref(),
            self.settings.cert_and_key.as_ref().map(|(c, _)| c.as_str()),
        ) {
            Some(advice) => format!("{advice}: {reason}"),
            None => reason,
        };
        let mut st = self.state.lock();
        if st.store.reachable || st.store.error.as_deref() != Some(reason.as_str()) {
            if st.store.reachable {
                tracing::warn!(endpoints = %self.endpoints(), "the fleet store is unreachable: {reason}; serving with the intents applied so far");
                st.store.since_ms = now_ms();
            }
            st.store.reachable = false;
            st.store.error = Some(reason.clone());
        }
        FleetError::Unreachable {
            endpoints: self.endpoints(),
            reason,
        }
    }

    fn reachable(&self) {
        let mut st = self.state.lock();
        if !st.store.reachable {
            tracing::info!(endpoints = %self.endpoints(), "the fleet store answers");
            st.store = StoreState {
                reachable: true,
                since_ms: now_ms(),
                error: None,
            };
        }
    }

    /// A client of etcd (connected once; tonic's channel reconnects by
    /// itself, the streams over it are started again by their loops).
    async fn client(&self) -> Result<Client, FleetError> {
        let mut c = self.client.lock().await;
        if self.reauth.swap(false, std::sync::atomic::Ordering::SeqCst) && c.take().is_some() {
            tracing::info!(endpoints = %self.endpoints(), "the fleet store refused this instance's auth token: logging in again");
        }
        if let Some(c) = &*c {
            return Ok(c.clone());
        }
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2))
            .with_keep_alive(Duration::from_secs(1), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        if let Some((u, p)) = &self.settings.user {
            opts = opts.with_user(u.clone(), p.clone());
        }
        if let Some(ca) = &self.settings.ca_file {
            let pem = pem_file(ca, "ca_file", "CERTIFICATE")?;
            let mut tls = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(pem));
            if let Some((cert, key)) = &self.settings.cert_and_key {
                let c = pem_file(cert, "cert_file", "CERTIFICATE")?;
                let k = pem_file(key, "key_file", "PRIVATE KEY")?;
                tls = tls.identity(etcd_client::Identity::from_pem(c, k));
            }
            opts = opts.with_tls(tls);
        }
        let client = Client::connect(&self.settings.endpoints, Some(opts))
            .await
            .map_err(|e| self.unreachable(causes(&e)))?;
        *c = Some(client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn tls_problems_name_the_file_and_the_cause() {
        let e = E(
            "transport error",
            Some(Box::new(E("invalid peer certificate: UnknownIssuer", None))),
        );
        assert_eq!(
            causes(&e),
            "transport error: invalid peer certificate: UnknownIssuer"
        );
        let dir = std::env::temp_dir().join(format!("sextant-fleet-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("client-key.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let k = key.display().to_string();
        assert!(pem_file(&k, "key_file", "PRIVATE KEY").is_ok());
        let e = pem_file(&k, "cert_file", "CERTIFICATE")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cert_file") && e.contains("no PEM CERTIFICATE"),
            "{e}"
        );
        let e = pem_file("/nonexistent/ca.pem", "ca_file", "CERTIFICATE")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[cluster] ca_file /nonexistent/ca.pem"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
