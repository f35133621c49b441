//! `sextant`: reads the command line and the config, then runs the proxy
//! (the `sextant_proxy` library).

use clap::{Parser, Subcommand};
use sextant_config::Config;
use std::path::PathBuf;

#[cfg(feature = "count-allocations")]
#[global_allocator]
static ALLOCATOR: sextant_proxy::alloc_count::Counting = sextant_proxy::alloc_count::Counting;

/// sextant - a MySQL-protocol proxy: read/write splitting, pooling, HA
#[derive(Parser)]
#[command(
    name = "sextant",
    version,
    after_help = "Logging: [log] in the config; RUST_LOG (info, debug, trace, or per module, e.g. RUST_LOG=sextant_proxy=debug) overrides its level."
)]
struct Cli {
    /// The config file to run with (for `fleet`: whose [cluster] names
    /// the fleet).
    #[arg(short, long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Only validate the config and explain every error.
    #[arg(long, requires = "config")]
    check: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Validate a config and explain every error.
    CheckConfig { file: PathBuf },
    /// A fleet's shared config (the etcd of --config's [cluster]).
    #[command(subcommand)]
    Fleet(FleetCmd),
}

#[derive(Subcommand)]
enum FleetCmd {
    /// Validate FILE as check-config does and store it as the fleet's
    /// config; every instance applies it (keeping its own local keys).
    Push {
        file: PathBuf,
        /// The fleet config revision FILE is based on; refused if the
        /// fleet's is no longer at it. Default: the revision on FILE's
        /// first line (as `sextant fleet config` writes it), else 0.
        #[arg(long)]
        base: Option<i64>,
    },
    /// Print the fleet's config, its first line naming its revision.
    Config,
}

fn main() {
    let cli = Cli::parse();
    let (path, check) = match (cli.command, cli.config) {
        (Some(Cmd::CheckConfig { file }), _) => (file, true),
        (Some(Cmd::Fleet(cmd)), local) => fleet(cmd, local),
        (None, Some(file)) => (file, cli.check),
        (None, None) => {
            eprintln!("sextant: no config file given (use --config FILE; --help for more)");
            std::process::exit(2);
        }
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
        if let Some(layout) = &config.layout {
            print!("sharding:\n{}", layout.explain());
        }
        return;
    }
    raise_fd_limit();
    init_logging(&config.log);
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
    let rt = runtime();
    if let Err(e) = rt.block_on(sextant_proxy::run(config, Some(path), threads)) {
        eprintln!("sextant: {e}");
        std::process::exit(1);
    }
}

/// The main thread's runtime (or the process ends, saying why).
fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sextant: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    }
}

/// `sextant fleet ...`: exits when done.
fn fleet(cmd: FleetCmd, local: Option<PathBuf>) -> ! {
    let Some(local) = local else {
        eprintln!("sextant: give --config FILE: its [cluster] names the fleet");
        std::process::exit(2);
    };
    let r = runtime().block_on(async {
        match cmd {
            FleetCmd::Push { file, base } => sextant_proxy::cli_push(&file, &local, base).await,
            FleetCmd::Config => sextant_proxy::cli_config(&local).await,
        }
    });
    match r {
        Ok(out) => {
            println!("{out}");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("sextant: {e}");
            std::process::exit(1)
        }
    }
}

/// Logs to stdout as `[log]` says: text (colours only on a terminal) or
/// JSON lines; the level from RUST_LOG if set, else `[log] level`, which a
/// reload may change (RUST_LOG then still wins).
fn init_logging(log: &sextant_config::Log) {
    use std::io::IsTerminal;
    use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter};
    let from_env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let filter = match &from_env {
        Some(v) => EnvFilter::new(v),
        None => EnvFilter::new(&log.level),
    };
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    match log.format {
        sextant_config::LogFormat::Text => registry
            .with(tracing_subscriber::fmt::layer().with_ansi(std::io::stdout().is_terminal()))
            .init(),
        sextant_config::LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(false)
                    .with_span_list(true),
            )
            .init(),
    }
    if from_env.is_none() {
        sextant_proxy::on_log_level_change(Box::new(move |level: &str| {
            handle
                .reload(EnvFilter::new(level))
                .map_err(|e| e.to_string())
        }));
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
