//! Starting the proxy: the runtime of the config, the login set-up, the
//! listeners, the worker threads, the monitors and the pool upkeep. `run`
//! serves until interrupted; the `sextant` binary is a thin `main` around
//! it, and tests or an embedding program can call it in-process.

use crate::errors::StartError;
use crate::frontend::{build_auth, guard};
use crate::runtime::Runtime;
use crate::shared::{AdminUsers, Shared};
use crate::shutdown::notify_systemd;
use crate::work::Work;
use crate::{admin, client, errors, frontend, session};
use arc_swap::ArcSwap;
use sextant_backend::Pool;
use sextant_config::Config;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The distributed-transaction coordinator: its decision log opened (and
/// read: what a crash left is resolved by recovery) and its instance id.
fn coordinator(config: &Config) -> Result<Arc<sextant_xa::Coordinator>, StartError> {
    let x = &config.xa;
    let instance = match (&x.instance_id, &config.cluster) {
        // In a fleet, the instance's fleet id: other instances settle its
        // transactions once that id's lease expired.
        (configured, Some(c)) => {
            let id = sextant_fleet::id::load_or_make(
                c.instance_id.as_deref(),
                std::path::Path::new(&c.state_dir),
            )
            .map_err(|e| StartError::Fleet(e.to_string()))?;
            if let Some(x_id) = configured.as_ref().filter(|x_id| **x_id != id) {
                return Err(StartError::Xa(format!(
                    "[xa] instance_id {x_id:?} differs from this instance's fleet id {id:?}: in a fleet, distributed transactions carry the fleet id; remove [xa] instance_id"
                )));
            }
            id
        }
        (Some(id), None) => id.clone(),
        (None, None) => {
            let legacy = || sextant_xa::xid::instance_from_listen(&config.proxy.listen.0);
            let (id, made) = sextant_xa::instance::kept(std::path::Path::new(&x.log_dir), legacy)
                .map_err(|e| StartError::Xa(e.to_string()))?;
            if made {
                tracing::info!(instance = %id, log = %x.log_dir, "distributed transactions: this instance's id, made now and kept beside the decision log");
            }
            id
        }
    };
    let log = sextant_xa::FileLog::open(std::path::Path::new(&x.log_dir))
        .map_err(|e| StartError::Xa(format!("log_dir {:?}: {e}", x.log_dir)))?;
    let failpoint = sextant_xa::Failpoint::from_env().map_err(StartError::Xa)?;
    if let Some(step) = failpoint.armed() {
        tracing::warn!(
            ?step,
            "XA failpoint armed (a test setting): sextant will stop itself there"
        );
    }
    let pending = sextant_xa::DecisionLog::pending(&log).len();
    tracing::info!(
        instance = %instance,
        log = %x.log_dir,
        pending,
        "distributed transactions: decision log open"
    );
    Ok(Arc::new(sextant_xa::Coordinator::new(
        &instance,
        Arc::new(log),
        failpoint,
        Duration::from_millis(x.recover_interval_ms),
    )))
}

/// Serves the config's listeners with `threads` worker threads (0 or 1:
/// the sessions run on the calling runtime) until interrupted.
/// `config_path`: the file `config` was read from, which SIGHUP and
/// `RELOAD CONFIG` read again.
pub async fn run(
    config: Config,
    config_path: Option<std::path::PathBuf>,
    threads: usize,
) -> Result<(), StartError> {
    let auth = build_auth(&config, None)?;
    let runtime = Runtime::build(config, None)?;
    let config = &runtime.config;
    let server_version = match &config.proxy.server_version {
        Some(v) => v.clone(),
        None => probe_version(config, &runtime.pool).await,
    };
    let listener = listen(&config.proxy.listen.0).map_err(|e| StartError::Listen {
        addr: config.proxy.listen.to_string(),
        which: "",
        source: e,
    })?;
    let admin = match &config.admin {
        Some(a) => Some((
            tokio::net::TcpListener::bind(&a.listen.0)
                .await
                .map_err(|e| StartError::Listen {
                    addr: a.listen.to_string(),
                    which: " (admin)",
                    source: e,
                })?,
            Arc::new(AdminUsers {
                user: a.user.clone(),
                password: a.password.clone(),
                peer: config
                    .cluster
                    .as_ref()
                    .map(|c| sextant_fleet::Seal::new(&c.secret).derive("peer admin login")),
            }),
        )),
        None => None,
    };
    let http =
        match config.admin.as_ref().and_then(|a| a.http_listen.as_ref()) {
            Some(addr) => Some(tokio::net::TcpListener::bind(&addr.0).await.map_err(|e| {
                StartError::Listen {
                    addr: addr.to_string(),
                    which: " (http)",
                    source: e,
                }
            })?),
            None => None,
        };
    let max_connections = client_limit(&runtime);
    let admin_guard = guard(&config.proxy);
    let xa = match &runtime.sharding {
        Some(sh) => {
            let c = coordinator(config)?;
            let mut claim = crate::xa_recovery::Claim::new(&c.instance);
            match claim.hold(&runtime, sh, 5).await {
                crate::xa_recovery::Held::Yes => c.set_id_claimed(true),
                crate::xa_recovery::Held::Other(group) => {
                    return Err(StartError::Xa(format!(
                        "instance id {:?} is in use: another sextant holds the named lock {:?} on group {group}'s primary. Each sextant sharing these servers needs its own id: remove [xa] instance_id to let each make its own, or set a distinct one",
                        c.instance, claim.name
                    )))
                }
                crate::xa_recovery::Held::Unknown(e) => tracing::warn!(
                    instance = %c.instance,
                    "cannot claim this instance's id yet ({e}); transactions over several groups are refused, and XA recovery waits, until it is claimed"
                ),
            }
            Some((c, claim))
        }
        None => None,
    };
    let (xa, claim) = match xa {
        Some((c, claim)) => (Some(c), Some(claim)),
        None => (None, None),
    };
    let shared = Arc::new(Shared {
        max_connections,
        runtime: ArcSwap::from_pointee(runtime),
        counters: sextant_admin::Counters {
            allocations: crate::alloc_count::counter(),
            ..Default::default()
        },
        server_version,
        next_conn_id: AtomicU32::new(1),
        conn_id_prefix: AtomicU32::new(0),
        auth: ArcSwap::from_pointee(auth),
        config_path,
        monitors: Default::default(),
        admin_auth: frontend::AuthSetup {
            guard: Arc::new(admin_guard),
            ..frontend::AuthSetup::plain()
        },
        sessions: Default::default(),
        xa,
        workers: Default::default(),
        draining: Default::default(),
        fleet: Default::default(),
        fleet_config: Default::default(),
        fleet_instances: std::sync::atomic::AtomicUsize::new(1),
        servers_packet: Default::default(),
        peers: Default::default(),
        accounts: parking_lot::Mutex::new(None),
    });
    crate::fleet::join(&shared).await?;
    if let Some((l, users)) = admin {
        tracing::info!(
            "admin port listening on {}",
            l.local_addr().map(|a| a.to_string()).unwrap_or_default()
        );
        tokio::spawn(admin::serve(l, shared.clone(), users));
    }
    if let Some(l) = http {
        tracing::info!(
            "http port listening on {} (/metrics, /healthz, /readyz, /api, status page at /)",
            l.local_addr().map(|a| a.to_string()).unwrap_or_default()
        );
        tokio::spawn(crate::http::serve(l, shared.clone()));
    }
    if let (Some(c), Some(claim)) = (&shared.xa, claim) {
        tokio::spawn(crate::xa_recovery::run(shared.clone(), c.clone(), claim));
    }
    let monitor_on = shared.runtime().config.monitor.enabled;
    if monitor_on {
        warn_monitor_account(&shared.runtime());
    }
    shared.monitors.follow(&shared.runtime(), false);
    {
        let shared = shared.clone();
        tokio::spawn(async move { crate::accounts::warn(&shared).await });
    }
    {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let rt = shared.runtime();
                // Without the monitor, a TCP probe is what brings a
                // failed server back.
                let monitor_on = rt.config.monitor.enabled;
                let upkeep = |s: &Arc<sextant_backend::Server>| {
                    s.reap();
                    s.health.stats.tick();
                    if !monitor_on && !s.health.reachable() {
                        let s = s.clone();
                        tokio::spawn(async move { s.probe().await });
                    }
                };
                rt.pool.servers().for_each(upkeep);
                let smallest = rt
                    .pool
                    .servers()
                    .map(|s| s.health.packet_limit() as usize)
                    .filter(|&n| n > 0)
                    .min()
                    .unwrap_or(0);
                shared
                    .servers_packet
                    .store(smallest, std::sync::atomic::Ordering::Relaxed);
                shared
                    .monitors
                    .upkeep_retired(|g| g.members.iter().for_each(upkeep));
            }
        });
    }
    tracing::info!(
        "sextant {} listening on {} (server version {:?})",
        env!("CARGO_PKG_VERSION"),
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        shared.server_version
    );
    let workers = if threads > 1 {
        start_workers(&shared, threads)?
    } else {
        Vec::new()
    };
    let _ = shared.workers.set(workers.clone());
    notify_systemd(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("serving"),
    ]);
    let mut next_worker = 0;
    let accept = async {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            if workers.is_empty() {
                tokio::spawn(serve_client(shared.clone(), stream, peer));
                continue;
            }
            next_worker = (next_worker + 1) % workers.len();
            match stream.into_std() {
                Ok(s) => {
                    if workers[next_worker].send(Work::Client(s, peer)).is_err() {
                        tracing::error!("worker thread {next_worker} is gone");
                    }
                }
                Err(e) => tracing::warn!("cannot hand {peer} to a worker thread: {e}"),
            }
        }
    };
    let reloads = {
        let shared = shared.clone();
        async move {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                tracing::warn!("cannot catch SIGHUP: reload with RELOAD CONFIG on the admin port");
                return std::future::pending().await;
            };
            while hup.recv().await.is_some() {
                let r = crate::reload::reload(&shared).await;
                crate::reload::log_outcome("SIGHUP", &r);
            }
        }
    };
    let stop = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            },
            Err(e) => {
                tracing::warn!("cannot catch SIGTERM ({e}): it will end sextant at once");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    };
    let (mut accept, mut reloads) = (Box::pin(accept), Box::pin(reloads));
    let why = tokio::select! {
        _ = &mut accept => "the listener failed",
        _ = &mut reloads => "the reload task ended",
        s = stop => s,
    };
    let delay = Duration::from_millis(shared.runtime().config.proxy.drain_delay_ms);
    if !delay.is_zero() && why.starts_with("SIG") {
        // /readyz fails from now on; clients a balancer still sends
        // meanwhile are served as usual.
        shared.draining.store(true, Ordering::Relaxed);
        tracing::info!(
            "{why}: draining: /readyz answers 503, new clients are still served for drain_delay_ms ({} ms)",
            delay.as_millis()
        );
        notify_systemd(&[sd_notify::NotifyState::Status("draining")]);
        tokio::select! {
            _ = &mut accept => {}
            _ = &mut reloads => {}
            _ = tokio::time::sleep(delay) => {}
        }
    }
    // The listener closes: no new clients from here on.
    drop(accept);
    drop(listener);
    crate::fleet::leave(&shared).await;
    drain(&shared, &workers, why).await;
    Ok(())
}

/// Stops the sessions (see shutdown.rs) and waits until they have ended,
/// up to shutdown_timeout_ms.
async fn drain(shared: &Shared, workers: &[tokio::sync::mpsc::UnboundedSender<Work>], why: &str) {
    let limit = Duration::from_millis(shared.runtime().config.proxy.shutdown_timeout_ms);
    let open = shared.counters.client_connections.load(Ordering::Relaxed);
    tracing::info!(
        "{why}: shutting down; no new clients; {open} session(s) end when their statement or transaction does (up to {} ms)",
        limit.as_millis()
    );
    notify_systemd(&[
        sd_notify::NotifyState::Stopping,
        sd_notify::NotifyState::Status("shutting down: sessions finishing"),
    ]);
    crate::shutdown::request_here();
    for w in workers {
        let _ = w.send(Work::Shutdown);
    }
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let open = shared.counters.client_connections.load(Ordering::Relaxed);
        if open == 0 {
            tracing::info!("every session ended: sextant stopped");
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "{open} session(s) still open after shutdown_timeout_ms ({} ms): closing them (their open transactions roll back); sextant stopped",
                limit.as_millis()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `n` worker threads, each with a current-thread runtime serving
/// the client connections it is handed.
fn start_workers(
    shared: &Arc<Shared>,
    n: usize,
) -> Result<Vec<tokio::sync::mpsc::UnboundedSender<Work>>, StartError> {
    let mut senders = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Work>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StartError::Thread {
                what: format!("worker runtime {i}"),
                source: e,
            })?;
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("sextant-w{i}"))
            .spawn(move || {
                rt.block_on(async move {
                    while let Some(work) = rx.recv().await {
                        let (s, peer) = match work {
                            Work::Client(s, peer) => (s, peer),
                            Work::Shutdown => {
                                crate::shutdown::request_here();
                                continue;
                            }
                            Work::Digests(reply) => {
                                let _ = reply.send(crate::digests::snapshot());
                                continue;
                            }
                            Work::ResetDigests => {
                                crate::digests::reset();
                                continue;
                            }
                        };
                        match tokio::net::TcpStream::from_std(s) {
                            Ok(stream) => {
                                tokio::spawn(serve_client(shared.clone(), stream, peer));
                            }
                            Err(e) => tracing::warn!("cannot serve {peer}: {e}"),
                        }
                    }
                })
            })
            .map_err(|e| StartError::Thread {
                what: format!("worker thread {i}"),
                source: e,
            })?;
        senders.push(tx);
    }
    Ok(senders)
}

/// One client connection, from login to close.
async fn serve_client(
    shared: Arc<Shared>,
    mut stream: tokio::net::TcpStream,
    mut peer: std::net::SocketAddr,
) {
    let (from_balancer, handshake_ms) = {
        let rt = shared.runtime.load();
        (
            rt.proxy_from.contains(peer.ip()),
            rt.config.proxy.handshake_timeout_ms,
        )
    };
    // Counted from accept, a balancer's header still to come included:
    // connections that never finish their handshake take places too.
    let n = shared
        .counters
        .client_connections
        .fetch_add(1, Ordering::Relaxed)
        + 1;
    let _counted = Counted(&shared);
    if from_balancer && n <= shared.max_connections {
        let limit = std::time::Duration::from_millis(handshake_ms);
        let read = tokio::time::timeout(limit, crate::proxy_header::read(&mut stream)).await;
        let refused = match read {
            Ok(Ok(Some(client))) => {
                tracing::trace!(balancer = %peer, %client, "PROXY protocol header");
                peer = client;
                None
            }
            // The balancer's own connection (a health check).
            Ok(Ok(None)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "{} within {handshake_ms} ms",
                crate::proxy_header::HeaderError::Missing
            )),
        };
        if let Some(why) = refused {
            tracing::info!(%peer, "connection refused: {why}");
            shared
                .counters
                .client_errors
                .fetch_add(1, Ordering::Relaxed);
            let mut client = client::Client::new(stream, peer, client::PRE_AUTH_MAX_PACKET);
            let e = errors::SessionError::Handshake(why);
            let _ = client.send_error(0, &e).await;
            return;
        }
    }
    let c = &shared.counters;
    c.client_connections_total.fetch_add(1, Ordering::Relaxed);
    let id = shared.new_conn_id();
    let max_connections = shared.max_connections;
    // Until the client has logged in, a small bound (Session::run lifts it).
    let mut client = client::Client::new(stream, peer, client::PRE_AUTH_MAX_PACKET);
    if n > max_connections {
        let e = errors::SessionError::TooManyConnections(max_connections);
        let _ = client.send_error(0, &e).await;
    } else {
        session::Session::run(shared.clone(), client, id).await;
    }
}

/// A client connection's place in `client_connections`, given back
/// however its task ends.
struct Counted<'a>(&'a Shared);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0
            .counters
            .client_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// The client listener, with a deep accept queue: when thousands of
/// clients connect at once (an application fleet restarting) while the
/// sessions keep the threads busy, tokio's default backlog of 1024
/// overflowed and the kernel dropped SYNs, which clients only retry after
/// 1, 3, 7... seconds (measured: 165 of 1,000 simultaneous clients not
/// logged in after 10 s). The kernel caps it at net.core.somaxconn.
fn listen(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(addr)?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not an address"))?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(65_535)
}

/// How many client sessions fit in the file descriptor limit: every
/// client takes one, and so does every server connection the pools may
/// open, plus the listeners, the monitors and the log. Beyond it accept()
/// would fail and clients would hang in the backlog; within it, extra
/// clients get 1040 at once.
fn client_limit(rt: &Runtime) -> usize {
    let configured = rt.config.proxy.max_connections;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return configured;
    }
    let servers: usize = rt
        .config
        .groups
        .values()
        .map(|g| (g.pool_max + 1) * (g.replicas.len() + 1))
        .sum();
    let reserved = servers + 64;
    let room = (lim.rlim_cur as usize).saturating_sub(reserved).max(1);
    if room < configured {
        tracing::warn!(
            "max_connections {configured} does not fit in the file descriptor limit ({}) with \
             room for the server connections ({servers}): serving at most {room} clients \
             (raise the limit, e.g. LimitNOFILE in a systemd unit)",
            lim.rlim_cur
        );
        return room;
    }
    configured
}

/// The monitor without an account of its own logs in as the first user.
fn warn_monitor_account(rt: &Runtime) {
    let m = &rt.config.monitor;
    if let (None, Some(u)) = (&m.user, rt.config.users.first()) {
        tracing::warn!(
            "the monitor logs in as {:?}, the first user's server account: a server-side \
             KILL of that account's connections stops the monitor too; give [monitor] a \
             user and password of its own",
            u.backend_user()
        );
    }
}

/// The version string clients see: the default group's primary's own, so
/// client libraries enable the same features they would directly.
async fn probe_version(config: &Config, pool: &Pool) -> String {
    const FALLBACK: &str = "8.0.36-sextant";
    let Some(u) = config.users.first() else {
        return FALLBACK.into();
    };
    let Some(g) = pool.groups.get(config.group_for(u)) else {
        return FALLBACK.into();
    };
    let flavor = sextant_backend::Flavor::new(0, frontend::DEFAULT_CHARSET);
    let Some(primary) = g.primary() else {
        return FALLBACK.into();
    };
    match primary
        .acquire(u.backend_user(), u.backend_password(), flavor)
        .await
    {
        Ok(c) => {
            let v = c.server_version.clone();
            primary.release(c);
            v
        }
        Err(e) => {
            tracing::warn!(
                "cannot reach the primary at start-up ({e}); announcing version {FALLBACK}"
            );
            FALLBACK.into()
        }
    }
}
