//! `sextant`: the proxy binary. Reads the config, builds the pools, and
//! serves the client and admin ports.

mod admin;
mod alloc_count;
mod client;
mod errors;
mod frontend;
mod relay;
mod session;
mod shared;

use sextant_backend::{Group, Pool, PoolSettings, Role, Server};
use sextant_config::Config;
use shared::{AdminUsers, Shared, UserEntry};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "\
sextant - a MySQL-protocol proxy: read/write splitting, pooling, HA

USAGE:
    sextant --config FILE            run the proxy
    sextant check-config FILE        validate a config and explain every error
    sextant --config FILE --check    the same
    sextant --version
    sextant --help

Logging: RUST_LOG=info (default), debug, trace; or per module,
e.g. RUST_LOG=sextant=debug.";

enum Cmd {
    Run(PathBuf),
    Check(PathBuf),
}

fn parse_args() -> Result<Cmd, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = None;
    let mut check = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--version" | "-V" => {
                println!("sextant {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "--config" | "-c" => {
                i += 1;
                config = Some(args.get(i).ok_or("--config needs a file name")?.clone());
            }
            "--check" => check = true,
            "check-config" => {
                i += 1;
                config = Some(args.get(i).ok_or("check-config needs a file name")?.clone());
                check = true;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
        i += 1;
    }
    let config = PathBuf::from(config.ok_or("no config file given (use --config FILE)")?);
    Ok(if check {
        Cmd::Check(config)
    } else {
        Cmd::Run(config)
    })
}

#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

fn main() {
    let cmd = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sextant: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let (path, check) = match cmd {
        Cmd::Run(p) => (p, false),
        Cmd::Check(p) => (p, true),
    };
    let config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sextant: {e}");
            std::process::exit(1);
        }
    };
    if check {
        println!(
            "{}: OK ({} group(s), {} user(s))",
            path.display(),
            config.groups.len(),
            config.users.len()
        );
        return;
    }
    raise_fd_limit();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let threads = if config.proxy.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    } else {
        config.proxy.threads
    };
    // Every thread runs a current-thread runtime, where the I/O driver and
    // the sessions share the thread: a session lives on one thread from
    // login to close, and nothing it does wakes another thread (measured:
    // fewer context switches and less CPU per query than tokio's
    // work-stealing runtime, and pipelined reads pass their server
    // connection between sessions of one thread only). With one thread the
    // sessions run beside the listener; with more, the main thread accepts
    // and runs the monitors and the admin interface, and the sessions are
    // dealt out to `threads` worker threads in turn.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sextant: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run(config, threads)) {
        eprintln!("sextant: {e}");
        std::process::exit(1);
    }
}

/// Every client and server connection is a file descriptor; the usual soft
/// limit of 1024 would cap sextant far below its max_connections.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn build_pool(config: &Config) -> Result<Pool, String> {
    let mut pool = Pool::default();
    for (name, g) in &config.groups {
        let tls = if g.tls {
            Some(
                sextant_backend::tls::client_config(g.tls_ca.as_deref())
                    .map_err(|e| format!("groups.{name}: {e}"))?,
            )
        } else {
            None
        };
        let target = |addr: &str| -> Result<Option<sextant_backend::TlsTarget>, String> {
            match &tls {
                Some(config) => Ok(Some(sextant_backend::TlsTarget {
                    config: config.clone(),
                    name: sextant_backend::tls::server_name(addr)?,
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
            pipeline_depth: g.pipeline_depth,
            pipeline_connections: g.pipeline_connections,
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
        pool.groups.insert(
            name.clone(),
            Arc::new(Group::with_topology(
                name,
                primary,
                replicas,
                g.primary_weight,
                match g.topology {
                    sextant_config::Topology::Static => sextant_backend::Topology::Static,
                    sextant_config::Topology::Replication => sextant_backend::Topology::Replication,
                    sextant_config::Topology::GroupReplication => {
                        sextant_backend::Topology::GroupReplication
                    }
                    sextant_config::Topology::Galera => sextant_backend::Topology::Galera {
                        multi_writer: g.galera_multi_writer,
                    },
                },
                Duration::from_millis(g.primary_wait_ms),
            )),
        );
    }
    Ok(pool)
}

fn build_auth(config: &Config) -> Result<frontend::AuthSetup, String> {
    let p = &config.proxy;
    let tls = match (&p.tls_cert, &p.tls_key) {
        (Some(cert), Some(key)) => Some(sextant_backend::tls::server_config(cert, key)?),
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
            let pem = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read rsa_key {path}: {e}"))?;
            Some(Arc::new(
                sextant_backend::tls::RsaKeys::from_pem(&pem)
                    .map_err(|e| format!("{path}: {e}"))?,
            ))
        }
        (None, sextant_config::FullAuth::Never) => None,
        (None, _) => {
            tracing::info!("generating a 2048-bit RSA key for caching_sha2_password (set [proxy] rsa_key to use your own)");
            Some(Arc::new(sextant_backend::tls::RsaKeys::generate(2048)?))
        }
    };
    Ok(frontend::AuthSetup {
        tls,
        require_tls: p.require_tls,
        plugin,
        full_auth: p.sha2_full_auth,
        rsa,
        sha2_cache: Default::default(),
    })
}

async fn run(config: Config, threads: usize) -> Result<(), String> {
    let pool = build_pool(&config)?;
    let auth = build_auth(&config)?;
    let mut users = HashMap::new();
    for u in &config.users {
        let gname = config.group_for(u).to_string();
        let group = pool
            .groups
            .get(&gname)
            .cloned()
            .ok_or_else(|| format!("user {} names unknown group {gname}", u.name))?;
        users.insert(
            u.name.clone(),
            Arc::new(UserEntry {
                name: u.name.clone(),
                password: u.password.clone(),
                require_tls: u.require_tls,
                policy: config.routing.policy().with(&u.routing),
                latest_write: Default::default(),
                latest_write_server: Default::default(),
                latest_write_uuid: Default::default(),
                backend_user: u.backend_user().to_string(),
                backend_password: u.backend_password().to_string(),
                group,
            }),
        );
    }
    let server_version = match &config.proxy.server_version {
        Some(v) => v.clone(),
        None => probe_version(&config, &pool).await,
    };
    let listener = listen(&config.proxy.listen.0)
        .map_err(|e| format!("cannot listen on {}: {e}", config.proxy.listen))?;
    let admin = match &config.admin {
        Some(a) => Some((
            tokio::net::TcpListener::bind(&a.listen.0)
                .await
                .map_err(|e| format!("cannot listen on {} (admin): {e}", a.listen))?,
            Arc::new(AdminUsers {
                user: a.user.clone(),
                password: a.password.clone(),
            }),
        )),
        None => None,
    };
    let shared = Arc::new(Shared {
        config,
        pool,
        users,
        counters: sextant_admin::Counters {
            allocations: alloc_count::init_from_env().then_some(&alloc_count::ALLOCATIONS),
            ..Default::default()
        },
        server_version,
        next_conn_id: AtomicU32::new(1),
        auth,
        admin_auth: frontend::AuthSetup::plain(),
    });
    if let Some((l, users)) = admin {
        tracing::info!(
            "admin port listening on {}",
            l.local_addr().map(|a| a.to_string()).unwrap_or_default()
        );
        tokio::spawn(admin::serve(l, shared.clone(), users));
    }
    let monitor_on = shared.config.monitor.enabled;
    if monitor_on {
        start_monitors(&shared);
    }
    {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                for s in shared.pool.servers() {
                    s.reap();
                    // Without the monitor, a TCP probe is what brings a
                    // failed server back.
                    if !monitor_on && !s.reachable.load(Ordering::Relaxed) {
                        let s = s.clone();
                        tokio::spawn(async move { s.probe().await });
                    }
                }
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
                    if workers[next_worker].send((s, peer)).is_err() {
                        tracing::error!("worker thread {next_worker} is gone");
                    }
                }
                Err(e) => tracing::warn!("cannot hand {peer} to a worker thread: {e}"),
            }
        }
    };
    tokio::select! {
        _ = accept => Ok(()),
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("interrupted, shutting down");
            Ok(())
        }
    }
}

type Handoff = (std::net::TcpStream, std::net::SocketAddr);

/// Starts `n` worker threads, each with a current-thread runtime serving
/// the client connections it is handed.
fn start_workers(
    shared: &Arc<Shared>,
    n: usize,
) -> Result<Vec<tokio::sync::mpsc::UnboundedSender<Handoff>>, String> {
    let mut senders = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Handoff>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start worker runtime {i}: {e}"))?;
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("sextant-w{i}"))
            .spawn(move || {
                rt.block_on(async move {
                    while let Some((s, peer)) = rx.recv().await {
                        match tokio::net::TcpStream::from_std(s) {
                            Ok(stream) => {
                                tokio::spawn(serve_client(shared.clone(), stream, peer));
                            }
                            Err(e) => tracing::warn!("cannot serve {peer}: {e}"),
                        }
                    }
                })
            })
            .map_err(|e| format!("cannot start worker thread {i}: {e}"))?;
        senders.push(tx);
    }
    Ok(senders)
}

/// One client connection, from login to close.
async fn serve_client(
    shared: Arc<Shared>,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
) {
    let c = &shared.counters;
    let n = c.client_connections.fetch_add(1, Ordering::Relaxed) + 1;
    c.client_connections_total.fetch_add(1, Ordering::Relaxed);
    let id = shared.next_conn_id.fetch_add(1, Ordering::Relaxed);
    let max_connections = shared.config.proxy.max_connections;
    let mut client = client::Client::new(stream, peer, shared.config.proxy.max_allowed_packet);
    if n > max_connections {
        let e = errors::SessionError::TooManyConnections(max_connections);
        let _ = client.send_error(0, &e).await;
    } else {
        session::Session::run(shared.clone(), client, id).await;
    }
    shared
        .counters
        .client_connections
        .fetch_sub(1, Ordering::Relaxed);
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

fn start_monitors(shared: &Shared) {
    let m = &shared.config.monitor;
    let (user, password) = match (&m.user, &m.password, shared.config.users.first()) {
        (Some(u), Some(p), _) => (u.clone(), p.clone()),
        (_, _, Some(u)) => (
            u.backend_user().to_string(),
            u.backend_password().to_string(),
        ),
        _ => return,
    };
    let instance_id = sextant_monitor::instance_id();
    for (name, g) in &shared.pool.groups {
        let max_lag_ms = shared
            .config
            .groups
            .get(name)
            .map(|c| c.max_replica_lag_ms)
            .unwrap_or(0);
        for s in &g.members {
            let settings = sextant_monitor::Settings {
                interval: Duration::from_millis(m.interval_ms),
                user: user.clone(),
                password: password.clone(),
                heartbeat: m.heartbeat,
                max_lag_ms,
                instance_id,
            };
            tokio::spawn(sextant_monitor::watch(s.clone(), g.clone(), settings));
        }
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
