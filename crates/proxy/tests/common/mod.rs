//! Integration-test harness: a real MariaDB lab (primary + 2 replicas,
//! started by scripts/lab, once per test binary), sextant processes with
//! generated configs, and a minimal raw-protocol client for the cases no
//! client library will produce (malformed packets, cursors, long data).
//!
//! Nothing here skips: if MariaDB is missing, the lab fails to start and
//! the tests fail, saying why.

#![allow(dead_code)]

pub mod answers;
pub mod bank;
pub mod failover;
pub mod listening;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Lab {
    pub dir: PathBuf,
    pub primary: u16,
    pub replicas: Vec<u16>,
    /// CA, certificate and key (for 127.0.0.1) the lab's servers use.
    pub tls_ca: String,
    pub tls_cert: String,
    pub tls_key: String,
    /// Unix socket of each server: the primary's first.
    pub sockets: Vec<String>,
    /// A lab started with `--shards N`: each group's primary and replicas
    /// (the fields above are the first group's).
    pub shards: Vec<(u16, Vec<u16>)>,
}

static LAB: OnceLock<Lab> = OnceLock::new();

/// Extra `scripts/lab start` options for this test binary's lab (e.g.
/// `--galera`); set before the first `lab()`.
pub static LAB_ARGS: OnceLock<&'static [&'static str]> = OnceLock::new();

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

extern "C" {
    fn atexit(cb: extern "C" fn()) -> i32;
}

extern "C" fn stop_lab() {
    if let Some(l) = LAB.get() {
        let _ = Command::new(repo_root().join("scripts/lab"))
            .args(["stop", "--dir"])
            .arg(&l.dir)
            .stdout(Stdio::null())
            .status();
    }
}

/// The lab of this test binary, started on first use and stopped at exit.
pub fn lab() -> &'static Lab {
    LAB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("sextant-test-lab-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(repo_root().join("scripts/lab"))
            .args(["start", "--base-port", "auto", "--dir"])
            .arg(&dir)
            .args(LAB_ARGS.get().copied().unwrap_or(&[]))
            .output()
            .expect("cannot run scripts/lab");
        assert!(
            out.status.success(),
            "the MariaDB lab did not start (is mariadb-server installed?):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        unsafe {
            atexit(stop_lab);
        }
        let read = |d: &Path| std::fs::read_to_string(d.join("lab.env")).expect("lab.env");
        let var = |env: &str, k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{k} missing from lab.env"))
                .trim_matches('"')
                .to_string()
        };
        let ports = |env: &str| -> (u16, Vec<u16>) {
            (
                var(env, "LAB_PRIMARY_PORT").parse().expect("port"),
                var(env, "LAB_REPLICA_PORTS")
                    .split_whitespace()
                    .map(|p| p.parse().expect("port"))
                    .collect(),
            )
        };
        let top = read(&dir);
        let mut shards = Vec::new();
        let env = match top.lines().find_map(|l| l.strip_prefix("LAB_SHARDS=")) {
            Some(n) => {
                let n: usize = n.trim().parse().expect("LAB_SHARDS");
                for i in 1..=n {
                    shards.push(ports(&read(&dir.join(format!("shard{i}")))));
                }
                read(&dir.join("shard1"))
            }
            None => top,
        };
        let get = |k: &str| var(&env, k);
        Lab {
            shards,
            primary: get("LAB_PRIMARY_PORT").parse().expect("port"),
            replicas: get("LAB_REPLICA_PORTS")
                .split_whitespace()
                .map(|p| p.parse().expect("port"))
                .collect(),
            tls_ca: get("LAB_TLS_CA"),
            tls_cert: get("LAB_TLS_CERT"),
            tls_key: get("LAB_TLS_KEY"),
            sockets: get("LAB_SOCKETS")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            dir,
        }
    })
}

/// How a test wants its sextant: the one way to start one. Fields left at
/// their defaults give sextant in front of the lab's primary and replicas,
/// two worker threads, everything else at sextant's defaults:
/// `Setup { group: "pool_max = 2\n", ..Default::default() }.start()`.
#[derive(Default)]
pub struct Setup<'a> {
    /// Keys for [proxy].
    pub proxy: &'a str,
    /// More [[users]] entries (or keys for the last built-in user).
    pub users: &'a str,
    /// Keys for [groups.main], then any further tables.
    pub group: &'a str,
    /// A port to use instead of the lab's primary.
    pub primary: Option<u16>,
    pub no_replicas: bool,
    /// Replica ports instead of the lab's (e.g. closed ports).
    pub replicas_override: Option<Vec<u16>>,
    /// Weights for the lab's replicas.
    pub replica_weights: Option<Vec<u32>>,
    pub attempt: u32,
    /// Start sextant with SEXTANT_COUNT_ALLOCATIONS=1.
    pub count_allocations: bool,
    /// Name the lab's servers by their Unix sockets instead of TCP ports.
    pub unix_sockets: bool,
    /// Start sextant with this file descriptor limit (soft and hard).
    pub nofile: Option<u64>,
    /// Server groups written in full, in place of [groups.main].
    pub groups: Option<String>,
    /// Environment variables for the sextant process.
    pub env: Vec<(&'static str, String)>,
    /// Open the HTTP port ([admin] http_listen) on a free port.
    pub http: bool,
}

impl Setup<'_> {
    /// Starts sextant with this setup and waits until it listens.
    pub fn start(self) -> Proxy {
        Proxy::start(self)
    }
}

/// A port that is free now, below the kernel's ephemeral range (32768 and
/// up), so outgoing connections cannot take it before sextant binds it.
/// Labs use 20000-29999; proxies 10000-19999.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() as u16).wrapping_mul(7919) % 10_000;
    for _ in 0..10_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + (seed.wrapping_add(n.wrapping_mul(13)) % 10_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 10000-19999")
}

/// The instance id sextant keeps in `dir`. Sextant binds its port before
/// it makes the id (a taken port fails the start at once), and a connect
/// succeeds from the bind on, so the file may come a moment after the
/// port answers.
pub fn instance_id_in(dir: &Path) -> String {
    let file = dir.join("instance-id");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::read_to_string(&file) {
            Ok(s) => return s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{}: {e}", file.display()),
        }
    }
}

pub struct Proxy {
    child: Child,
    pub port: u16,
    pub admin_port: u16,
    /// The HTTP port, when the setup asked for one.
    pub http_port: Option<u16>,
    pub log: PathBuf,
    /// The config file it runs with.
    pub config: PathBuf,
}

impl Proxy {
    fn start(s: Setup<'_>) -> Proxy {
        let (extra_proxy, extra, primary, with_replicas, extra_users) =
            (s.proxy, s.group, s.primary, !s.no_replicas, s.users);
        let lab = lab();
        let port = free_port();
        let admin_port = free_port();
        let http_port = s.http.then(free_port);
        let ports = s
            .replicas_override
            .clone()
            .unwrap_or_else(|| lab.replicas.clone());
        let replicas: Vec<String> = if with_replicas {
            ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let addr = match s.unix_sockets {
                        true => lab.sockets[i + 1].clone(),
                        false => format!("127.0.0.1:{p}"),
                    };
                    match &s.replica_weights {
                        Some(w) => format!("{{ addr = \"{addr}\", weight = {} }}", w[i]),
                        None => format!("\"{addr}\""),
                    }
                })
                .collect()
        } else {
            vec![]
        };
        // Two worker threads unless the test chooses.
        let threads = if extra_proxy.contains("threads") {
            ""
        } else {
            "threads = 2"
        };
        let cfg = format!(
            r#"
[proxy]
listen = "127.0.0.1:{port}"
{threads}
{extra_proxy}

[admin]
listen = "127.0.0.1:{admin_port}"
user = "admin"
password = "adminpass"
{http}

[[users]]
name = "app"
password = "apppass"

[[users]]
name = "other"
password = "otherpass"
backend_user = "app"
backend_password = "apppass"
{extra_users}

{groups}
{extra}
"#,
            http = match http_port {
                Some(p) => format!("http_listen = \"127.0.0.1:{p}\""),
                None => String::new(),
            },
            groups = match &s.groups {
                Some(g) => g.clone(),
                None => format!(
                    "[groups.main]\nprimary = \"{}\"\nreplicas = [{}]",
                    match s.unix_sockets {
                        true => lab.sockets[0].clone(),
                        false => format!("127.0.0.1:{}", primary.unwrap_or(lab.primary)),
                    },
                    replicas.join(", ")
                ),
            },
        );
        let cfg = with_own_account(&cfg);
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sextant-logs");
        std::fs::create_dir_all(&logs).expect("log dir");
        let path = logs.join(format!("sextant-{port}.toml"));
        std::fs::write(&path, cfg).expect("write config");
        let log = logs.join(format!("sextant-{port}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sextant"));
        cmd.envs(s.env.iter().map(|(k, v)| (*k, v.as_str())));
        if let Some(n) = s.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit, which is async-signal-safe, runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .arg("--config")
            .arg(&path)
            .env(
                "SEXTANT_COUNT_ALLOCATIONS",
                if s.count_allocations { "1" } else { "0" },
            )
            .env(
                "RUST_LOG",
                match s.env.iter().find(|(k, _)| *k == "RUST_LOG") {
                    // (Empty: sextant takes [log] level.)
                    Some((_, v)) => v.clone(),
                    None => std::env::var("SEXTANT_TEST_LOG").unwrap_or_else(|_| "info".into()),
                },
            )
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(std::fs::File::create(log.with_extension("err")).expect("log"))
            .spawn()
            .expect("start sextant");
        let mut p = Proxy {
            child,
            port,
            admin_port,
            http_port,
            log,
            config: path,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !listening::listens(p.child.id(), port) {
            if let Ok(Some(st)) = p.child.try_wait() {
                let logs = p.logs();
                if logs.contains("cannot listen") && s.attempt < 3 {
                    // Another process took the port in between: new ports.
                    return Self::start(Setup {
                        attempt: s.attempt + 1,
                        replicas_override: s.replicas_override.clone(),
                        replica_weights: s.replica_weights.clone(),
                        groups: s.groups.clone(),
                        env: s.env.clone(),
                        ..s
                    });
                }
                panic!("sextant exited with {st}: {logs}");
            }
            assert!(
                Instant::now() < deadline,
                "sextant did not listen: {}",
                p.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }

    /// Whether the process has exited (a failpoint stopped it), waiting
    /// up to `within`.
    pub fn exited_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit status, once the process has exited, waiting up to
    /// `within`.
    pub fn exit_status(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the process a signal.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill() with the pid of a child this test started.
        let r = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0, "kill -{sig}");
    }

    /// Stops the process as a crash would (SIGKILL), and waits for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the same config again (after [`Proxy::kill9`] or a
    /// failpoint) with this environment, and waits until it listens. Its
    /// output is added to the same log.
    pub fn restart(&mut self, env: &[(&str, &str)]) {
        self.kill9();
        let append = |p: &Path| {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)
                .expect("log")
        };
        self.child = Command::new(env!("CARGO_BIN_EXE_sextant"))
            .arg("--config")
            .arg(&self.config)
            .envs(env.iter().copied())
            .env(
                "RUST_LOG",
                std::env::var("SEXTANT_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(append(&self.log))
            .stderr(append(&self.log.with_extension("err")))
            .spawn()
            .expect("restart sextant");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !listening::listens(self.child.id(), self.port) {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("sextant exited with {st} at restart: {}", self.logs());
            }
            assert!(Instant::now() < deadline, "sextant did not listen again");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn logs(&self) -> String {
        format!(
            "{}{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(self.log.with_extension("err")).unwrap_or_default()
        )
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, user: &str, pass: &str, db: &str) -> String {
        // prefer_socket=false: the crate would otherwise ask @@socket and
        // reconnect over the server's unix socket, bypassing sextant.
        format!(
            "mysql://{user}:{pass}@127.0.0.1:{}/{db}?prefer_socket=false",
            self.port
        )
    }

    pub fn conn(&self) -> mysql::Conn {
        mysql::Conn::new(
            mysql::Opts::from_url(&self.url("app", "apppass", "sextant_test")).expect("url"),
        )
        .expect("connect through sextant")
    }

    /// Sum of a SHOW BACKENDS column over all servers.
    pub fn backends_sum(&self, column: &str) -> u64 {
        self.backends_column(column).iter().sum()
    }

    /// A numeric SHOW BACKENDS column, server by server.
    pub fn backends_column(&self, column: &str) -> Vec<u64> {
        use mysql::prelude::Queryable;
        let rows: Vec<mysql::Row> = self.admin().query("SHOW BACKENDS").expect("SHOW BACKENDS");
        rows.iter()
            .map(|r| {
                r.get::<String, _>(column)
                    .unwrap_or_else(|| panic!("no column {column} in SHOW BACKENDS"))
                    .parse::<u64>()
                    .expect("a number")
            })
            .collect()
    }

    /// GET `path` from the HTTP port: (status code, body).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        let port = self.http_port.expect("Setup { http: true, .. }");
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the http port");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut raw = String::new();
        s.read_to_string(&mut raw).expect("read the answer");
        let (head, body) = raw.split_once("\r\n\r\n").expect("headers and body");
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status line");
        // Chunked bodies are not used: hyper sends Content-Length for a
        // full body.
        (code, body.to_string())
    }

    pub fn admin(&self) -> mysql::Conn {
        self.admin_with("adminpass")
            .expect("connect to the admin port")
    }

    /// A login to the admin port with this password.
    pub fn admin_with(&self, password: &str) -> mysql::Result<mysql::Conn> {
        mysql::Conn::new(
            mysql::OptsBuilder::new()
                .ip_or_hostname(Some("127.0.0.1"))
                .tcp_port(self.admin_port)
                .user(Some("admin"))
                .pass(Some(password))
                .prefer_socket(false),
        )
    }

    /// Resident set size of the sextant process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// Peak resident set size of the sextant process, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        status_kib_of(self.pid(), field)
    }
}

/// Resident memory of process `pid` now (KiB; 0 once it is gone), for a
/// thread that samples it while the test holds the proxy elsewhere.
pub fn rss_kib_of(pid: u32) -> u64 {
    status_kib_of(pid, "VmRSS:")
}

fn status_kib_of(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what sextant logged (CI keeps nothing else).
        if std::thread::panicking() {
            let logs = self.logs();
            let lines: Vec<&str> = logs.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "--- sextant on port {} ({} lines; the last {}):\n{}",
                self.port,
                lines.len(),
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// `[groups.data1]` .. `[groups.dataN]` for the lab's shards (started
/// with `--shards N`): each its primary and replicas, and `extra` keys.
pub fn shard_groups(extra: &str) -> String {
    let mut g = String::new();
    for (i, (primary, replicas)) in lab().shards.iter().enumerate() {
        let reps: Vec<String> = replicas
            .iter()
            .map(|p| format!("\"127.0.0.1:{p}\""))
            .collect();
        g += &format!(
            "[groups.data{}]\nprimary = \"127.0.0.1:{primary}\"\nreplicas = [{}]\n{extra}",
            i + 1,
            reps.join(", ")
        );
    }
    g
}

/// `[sharding]` with one hash vdb (id 1, integer keys) spreading `n`
/// slots over groups data1..dataN (slot i in data<i+1>), and `rest`.
pub fn hash_layout(n: usize, rest: &str) -> String {
    let parts: Vec<String> = (0..n).map(|i| format!("data{} = [{i}]", i + 1)).collect();
    format!(
        "[sharding]\nunlisted = \"default_group\"\n\n[[sharding.vdb]]\nid = 1\ntype = \"int\"\nmethod = \"hash\"\nnum = {n}\npartitions = {{ {} }}\n{rest}",
        parts.join(", ")
    )
}

/// Rows as text (NULL as None), for comparing what sextant and a server
/// return.
pub fn text_rows(rows: Vec<mysql::Row>) -> Vec<Vec<Option<String>>> {
    rows.into_iter()
        .map(|r| {
            r.unwrap()
                .into_iter()
                .map(|v| match v {
                    mysql::Value::NULL => None,
                    mysql::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    other => Some(other.as_sql(true)),
                })
                .collect()
        })
        .collect()
}

/// The lab's account for sextant's own machinery (scripts/lab grants it
/// what docs/security.md asks for), named in `[monitor]` unless a test's
/// config names another.
pub const OWN_USER: &str = "sextant";
pub const OWN_PASSWORD: &str = "sextantpass";

/// `cfg` with `[monitor] user` set to sextant's own lab account, as an
/// operator's config would: the application account `app` has no
/// privilege beyond its own schemas, so the monitor, XA decisions and
/// shard sequences need it. A config that names a monitor user keeps it.
pub fn with_own_account(cfg: &str) -> String {
    let account = format!("user = \"{OWN_USER}\"\npassword = \"{OWN_PASSWORD}\"\n");
    match cfg.find("\n[monitor]\n") {
        Some(at) => {
            let body_from = at + "\n[monitor]\n".len();
            let body_to = cfg[body_from..]
                .find("\n[")
                .map_or(cfg.len(), |i| body_from + i);
            if cfg[body_from..body_to]
                .lines()
                .any(|l| l.trim_start().starts_with("user"))
            {
                return cfg.to_string();
            }
            format!("{}{account}{}", &cfg[..body_from], &cfg[body_from..])
        }
        None => format!("{cfg}\n[monitor]\n{account}"),
    }
}

/// A direct connection to a lab server, as the operator (`dba`: the lab's
/// account with every privilege, for what tests set up on a server).
pub fn direct(port: u16) -> mysql::Conn {
    mysql::Conn::new(
        mysql::Opts::from_url(&format!(
            "mysql://dba:dbapass@127.0.0.1:{port}/sextant_test?prefer_socket=false"
        ))
        .expect("url"),
    )
    .expect("direct connection")
}

/// A global status counter of one server (e.g. "Com_select").
pub fn status_counter(port: u16, name: &str) -> u64 {
    use mysql::prelude::Queryable;
    let mut c = direct(port);
    let row: Option<(String, String)> = c
        .exec_first("SHOW GLOBAL STATUS WHERE Variable_name = ?", (name,))
        .expect("show status");
    row.map(|(_, v)| v.parse().unwrap_or(0)).unwrap_or(0)
}

/// Waits until every replica has applied everything the primary has.
pub fn sync_replicas() {
    use mysql::prelude::Queryable;
    let lab = lab();
    let pos: String = direct(lab.primary)
        .query_first("SELECT @@gtid_binlog_pos")
        .expect("gtid")
        .unwrap_or_default();
    for &r in &lab.replicas {
        let w: Option<i64> = direct(r)
            .exec_first("SELECT MASTER_GTID_WAIT(?, 30)", (pos.clone(),))
            .expect("gtid wait");
        assert_eq!(w, Some(0), "replica {r} did not catch up");
    }
}

/// Runs the mariadb command-line client against sextant.
pub fn cli(
    port: u16,
    user: &str,
    pass: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--no-defaults", "-h127.0.0.1", "--protocol=tcp"])
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"))
        .arg(format!("-p{pass}"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("mariadb client (apt-get install mariadb-client)");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("mariadb client output")
}

/// Runs a Python script with PyMySQL (Debian's python3-pymysql) against
/// sextant; the script gets PORT in its environment.
pub fn python(port: u16, script: &str) -> std::process::Output {
    Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .env("PORT", port.to_string())
        .output()
        .expect("python3")
}

pub fn assert_ok(out: &std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A bare protocol client: enough to log in and send arbitrary packets.
pub struct Raw {
    pub s: TcpStream,
    pub caps: u32,
}

pub const CAPS: u32 = 0x0000_0200 // PROTOCOL_41
    | 0x0000_8000 // SECURE_CONNECTION
    | 0x0008_0000 // PLUGIN_AUTH
    | 0x0002_0000 // MULTI_RESULTS
    | 0x0000_0008; // CONNECT_WITH_DB

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).ok();
        Raw { s, caps: CAPS }
    }

    pub fn login(port: u16, user: &str, pass: &str, db: Option<&str>) -> Raw {
        Self::login_with(port, user, pass, db, CAPS, vec![])
    }

    pub fn login_with(
        port: u16,
        user: &str,
        pass: &str,
        db: Option<&str>,
        caps: u32,
        attrs: Vec<(String, String)>,
    ) -> Raw {
        Self::login_mariadb(port, user, pass, db, caps, attrs, 0)
    }

    /// A login that asks for MariaDB extended capabilities (and so leaves
    /// out CLIENT_MYSQL) when `mariadb_caps` is not 0.
    pub fn login_mariadb(
        port: u16,
        user: &str,
        pass: &str,
        db: Option<&str>,
        caps: u32,
        attrs: Vec<(String, String)>,
        mariadb_caps: u32,
    ) -> Raw {
        let mut r = Raw::connect(port);
        r.caps = caps;
        let (_, greeting) = r.read().expect("greeting");
        let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting)
            .expect("greeting parses");
        let resp = sextant_protocol::handshake::HandshakeResponse {
            zstd_level: 0,
            mariadb_caps,
            capabilities: match mariadb_caps {
                0 => r.caps,
                _ => r.caps & !1,
            },
            max_packet: 1 << 30,
            charset: 45,
            user: user.into(),
            auth_response: sextant_protocol::auth::native_scramble(pass.as_bytes(), &hs.nonce),
            database: db.map(|d| d.into()),
            auth_plugin: Some("mysql_native_password".into()),
            attrs,
        };
        let mut p = Vec::new();
        resp.encode(&mut p);
        r.send(1, &p);
        let (_, ok) = r.read().expect("login reply");
        assert_eq!(ok[0], 0, "login failed: {}", String::from_utf8_lossy(&ok));
        r
    }

    pub fn send(&mut self, seq: u8, payload: &[u8]) {
        let mut out = Vec::new();
        sextant_protocol::codec::write_packet(&mut out, seq, payload);
        self.s.write_all(&out).expect("send");
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    /// One frame: (seq, payload); None at EOF.
    pub fn read(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut h = [0u8; 4];
        self.s.read_exact(&mut h).ok()?;
        let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
        let mut p = vec![0u8; len];
        self.s.read_exact(&mut p).ok()?;
        Some((h[3], p))
    }

    pub fn query(&mut self, sql: &str) {
        let mut p = vec![3u8];
        p.extend_from_slice(sql.as_bytes());
        self.send(0, &p);
    }

    /// Reads packets until an OK/EOF without MORE_RESULTS or an ERR, for
    /// simple result sets; returns them.
    pub fn read_response(&mut self) -> Vec<Vec<u8>> {
        self.read_response_as(sextant_protocol::tracker::Expect::Query)
    }

    pub fn read_response_as(&mut self, expect: sextant_protocol::tracker::Expect) -> Vec<Vec<u8>> {
        let deprecate = self.caps & (1 << 24) != 0;
        let optional_metadata = self.caps & (1 << 25) != 0;
        let mut t = sextant_protocol::tracker::Tracker::new(expect, deprecate)
            .with_metadata_flag(optional_metadata);
        let mut v = Vec::new();
        while !t.is_done() {
            let (_, p) = self.read().expect("response packet");
            t.feed(p.len(), &p).expect("valid response");
            v.push(p);
        }
        v
    }
}

impl Raw {
    /// Reads a whole text result (no DEPRECATE_EOF) through a large buffer,
    /// counting rows and bytes without keeping them.
    pub fn drain_result(&mut self) -> (u64, u64) {
        let mut rd = std::io::BufReader::with_capacity(1 << 20, self.s.try_clone().expect("clone"));
        let mut t = sextant_protocol::tracker::Tracker::new(
            sextant_protocol::tracker::Expect::Query,
            false,
        );
        let (mut packets, mut bytes) = (0u64, 0u64);
        let mut payload = Vec::new();
        while !t.is_done() {
            let mut h = [0u8; 4];
            rd.read_exact(&mut h).expect("frame header");
            let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
            payload.resize(len, 0);
            rd.read_exact(&mut payload).expect("frame");
            let kind = t.feed(len, &payload).expect("valid response");
            assert_ne!(
                kind,
                sextant_protocol::tracker::Packet::Err,
                "{}",
                String::from_utf8_lossy(&payload)
            );
            packets += 1;
            bytes += len as u64 + 4;
        }
        (packets, bytes)
    }
}

impl Raw {
    /// COM_STMT_EXECUTE of statement `id` with one parameter of MySQL type
    /// `ty`, sending its type, and `value` in binary form (empty when the
    /// value was sent as long data).
    pub fn execute_one(&mut self, id: u32, ty: u8, value: &[u8]) {
        let mut e = vec![0x17];
        e.extend_from_slice(&id.to_le_bytes());
        e.push(0); // no cursor
        e.extend_from_slice(&1u32.to_le_bytes()); // iterations
        e.push(0); // null bitmap
        e.push(1); // types follow
        e.extend_from_slice(&[ty, 0]);
        e.extend_from_slice(value);
        self.send(0, &e);
    }
}

/// A sysbench command against the lab's sbtest database, as the app user.
pub fn sysbench_cmd(port: u16, tables: u32, table_size: u32) -> Command {
    let mut c = Command::new("sysbench");
    c.args([
        "--db-driver=mysql",
        "--mysql-host=127.0.0.1",
        "--mysql-user=app",
        "--mysql-password=apppass",
    ])
    .arg("--mysql-db=sbtest")
    .arg(format!("--mysql-port={port}"))
    .arg(format!("--tables={tables}"))
    .arg(format!("--table-size={table_size}"));
    c
}

/// What a client of the compressed protocol is sent until the connection
/// closes (or `within` passes): the packets, decoded from sextant's zlib
/// frames by hand (a test's own frame numbering is not followed), and
/// whether it closed.
pub fn read_compressed(s: &mut TcpStream, within: Duration) -> (Vec<Vec<u8>>, bool) {
    s.set_read_timeout(Some(within)).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    let mut plain = Vec::new();
    let mut r = &raw[..];
    while r.len() >= 7 {
        let clen = r[0] as usize | (r[1] as usize) << 8 | (r[2] as usize) << 16;
        let ulen = r[4] as usize | (r[5] as usize) << 8 | (r[6] as usize) << 16;
        if r.len() < 7 + clen {
            break;
        }
        let body = &r[7..7 + clen];
        if ulen == 0 {
            plain.extend_from_slice(body);
        } else {
            let mut v = Vec::new();
            flate2::read::ZlibDecoder::new(body)
                .read_to_end(&mut v)
                .expect("sextant's frames inflate");
            assert_eq!(v.len(), ulen, "sextant's frame inflates to its header");
            plain.extend_from_slice(&v);
        }
        r = &r[7 + clen..];
    }
    let mut packets = Vec::new();
    let mut p = &plain[..];
    while let Some(h) = sextant_protocol::codec::parse_header(p) {
        if p.len() < 4 + h.len {
            break;
        }
        packets.push(p[4..4 + h.len].to_vec());
        p = &p[4 + h.len..];
    }
    (packets, closed)
}

/// The (errno, message) of an ERR packet payload.
pub fn err_of(p: &[u8]) -> (u16, String) {
    assert_eq!(
        p[0],
        0xff,
        "expected an error packet, got {:?}",
        String::from_utf8_lossy(p)
    );
    let e = sextant_protocol::packets::parse_err(p).expect("err packet");
    (e.code, String::from_utf8_lossy(e.message).into_owned())
}

/// A TCP forwarder in front of a lab server that a test can cut, to stand
/// for that server dying: after cut(), every open connection is closed as
/// soon as the next request arrives (before any answer), and new
/// connections are refused.
pub struct Forwarder {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Forwarder {
    pub fn start(target: u16) -> Forwarder {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("forwarder bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        std::thread::spawn(move || loop {
            if flag.load(Ordering::Relaxed) {
                return; // drops the listener: new connections are refused
            }
            match listener.accept() {
                Ok((client, _)) => {
                    client.set_nonblocking(false).ok();
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                        continue;
                    };
                    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                    let f = flag.clone();
                    // client -> server: stops at the first request after the cut.
                    std::thread::spawn(move || {
                        let (mut from, mut to) = (client, server);
                        let mut buf = [0u8; 65536];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || f.load(Ordering::Relaxed) {
                                break;
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                    std::thread::spawn(move || {
                        let (mut from, mut to) = (s2, c2);
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        });
        Forwarder { port, cut }
    }

    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TCP forwarder to `127.0.0.1:target` that a test can close and open
/// again, to cut one process off from a service others still reach:
/// while closed, every open connection is closed at its next byte either
/// way and new ones are closed at once; opened again, it forwards anew.
pub struct Gate {
    pub port: u16,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Gate {
    pub fn start(target: u16) -> Gate {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("gate bind");
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if flag.load(Ordering::Relaxed) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let f = flag.clone();
                    std::thread::spawn(move || {
                        let (mut from, mut to) = (from, to);
                        let mut buf = [0u8; 65536];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0
                                || f.load(Ordering::Relaxed)
                                || to.write_all(&buf[..n]).is_err()
                            {
                                break;
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Gate { port, closed }
    }

    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn open(&self) {
        self.closed
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Proxy {
    /// A server's state in SHOW BACKENDS (up, down, lagging, maintenance).
    pub fn state_of(&self, port: u16) -> String {
        self.state_at(&format!("127.0.0.1:{port}"))
    }

    /// The state of the server at `address` (host:port or socket path).
    pub fn state_at(&self, address: &str) -> String {
        use mysql::prelude::Queryable;
        let rows: Vec<mysql::Row> = self.admin().query("SHOW BACKENDS").unwrap();
        rows.iter()
            .find(|r| r.get::<String, _>("address").unwrap() == address)
            .map(|r| r.get::<String, _>("state").unwrap())
            .unwrap_or_else(|| panic!("no server {address} in SHOW BACKENDS"))
    }

    /// Waits until a server reaches `want`; returns how long it took.
    pub fn wait_state(&self, port: u16, want: &str, within: Duration) -> Duration {
        self.wait_state_at(&format!("127.0.0.1:{port}"), want, within)
    }

    /// The same for the server at `address` (host:port or socket path).
    pub fn wait_state_at(&self, address: &str, want: &str, within: Duration) -> Duration {
        let t = Instant::now();
        while self.state_at(address) != want {
            assert!(
                t.elapsed() < within,
                "{address} not {want} within {within:?} (is {})",
                self.state_at(address)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        t.elapsed()
    }
}

/// Sets a replication delay on every lab replica (0: none).
pub fn set_replica_delay(secs: u32) {
    for &r in &lab().replicas {
        set_delay(r, secs);
    }
}

/// Sets a replication delay on one lab replica (0: none), and checks that
/// the replica runs with it: a CHANGE MASTER that failed unnoticed (the
/// replica's threads not yet stopped) left a replica undelayed, and a
/// test that counted on the delay read there at once.
pub fn set_delay(replica: u16, secs: u32) {
    use mysql::prelude::Queryable;
    let mut d = direct(replica);
    let mut last = String::new();
    for _ in 0..20 {
        let r = d
            .query_drop("STOP SLAVE")
            .and_then(|()| d.query_drop(format!("CHANGE MASTER TO MASTER_DELAY = {secs}")))
            .and_then(|()| d.query_drop("START SLAVE"));
        if let Err(e) = r {
            last = e.to_string();
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let status: Option<mysql::Row> = d.query_first("SHOW SLAVE STATUS").unwrap();
        let delay = status.and_then(|r| r.get::<Option<u32>, _>("SQL_Delay").flatten());
        if delay == Some(secs) {
            return;
        }
        last = format!("SQL_Delay is {delay:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("replica {replica}: replication delay {secs} not set: {last}");
}

/// Puts the lab's replication back as it was (no delay, all threads
/// running, caught up) when dropped, whatever the test did.
pub struct RestoreReplication;

impl Drop for RestoreReplication {
    fn drop(&mut self) {
        set_replica_delay(0);
        sync_replicas();
    }
}

/// SIGKILLs lab server `index` (0: the primary, 1..: replicas or Galera
/// nodes).
pub fn kill_lab_server(index: usize) {
    kill_server_in(&lab().dir, index);
}

/// Kills server `index` of the lab (or shard) in `dir` with SIGKILL.
pub fn kill_server_in(dir: &Path, index: usize) {
    signal_server_in(dir, index, "-9");
    let _ = std::fs::remove_file(dir.join(format!("s{index}.pid")));
}

/// Freezes lab server `index` (SIGSTOP): it keeps its connections open and
/// answers nothing, as a stalled machine would. Thawed when the guard drops.
pub fn stall_lab_server(index: usize) -> Stalled {
    signal_lab_server(index, "-STOP");
    Stalled(index)
}

pub struct Stalled(usize);

impl Drop for Stalled {
    fn drop(&mut self) {
        signal_lab_server(self.0, "-CONT");
    }
}

fn signal_lab_server(index: usize, signal: &str) {
    signal_server_in(&lab().dir, index, signal)
}

fn signal_server_in(dir: &Path, index: usize, signal: &str) {
    let pidfile = dir.join(format!("s{index}.pid"));
    let pid = std::fs::read_to_string(&pidfile)
        .expect("pid file")
        .trim()
        .to_string();
    assert!(Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill")
        .success());
}

/// Starts lab server `index` again with its own config. The lab stops it
/// by its pid file when the test binary exits; nobody waits for it here.
#[allow(clippy::zombie_processes)]
pub fn restart_lab_server(index: usize) {
    restart_server_in(&lab().dir, index)
}

/// Waits (up to a minute) until the lab server on `port` takes logins
/// again, after [`restart_server_in`] (which does not wait): a test that
/// starts next would otherwise find it still starting.
pub fn wait_server_up(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!("mysql://dba:dbapass@127.0.0.1:{port}/?prefer_socket=false");
    while mysql::Conn::new(mysql::Opts::from_url(&url).expect("url")).is_err() {
        assert!(
            Instant::now() < deadline,
            "the server on {port} did not come back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts server `index` of the lab (or shard) in `dir` again.
#[allow(clippy::zombie_processes)]
pub fn restart_server_in(dir: &Path, index: usize) {
    Command::new("mariadbd")
        .arg(format!(
            "--defaults-file={}",
            dir.join(format!("s{index}.cnf")).display()
        ))
        .arg("--user=root")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("restart mariadbd");
}

/// A finished sysbench run that must have seen no error: returns its
/// report, and the value of one of its counters (e.g. "queries:").
pub fn sysbench_clean(out: &std::process::Output, what: &str, counter: &str) -> (String, u64) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !text.contains("FATAL"),
        "sysbench saw an error when {what}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(counter))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    (text, n)
}

/// sysbench's tables (`tables` x `rows`) on the server at `port`.
pub fn sysbench_prepare(port: u16, tables: u32, rows: u32) {
    // Tables from an earlier test of the same lab go first (sysbench's
    // prepare refuses to overwrite them).
    let _ = sysbench_cmd(port, tables, rows)
        .args(["oltp_read_only", "cleanup"])
        .output();
    assert_ok(
        &sysbench_cmd(port, tables, rows)
            .args(["oltp_read_only", "prepare"])
            .output()
            .expect("sysbench"),
        "sysbench prepare",
    );
}

/// Clients inserting numbered rows `(writer, seq)` into `table` through
/// sextant, each on its own session (a new one if the session is lost),
/// until stopped; what each saw acknowledged, and the errors it got.
pub struct NumberedWriters {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handles: Vec<std::thread::JoinHandle<WriterReport>>,
}

pub struct WriterReport {
    pub acked: Vec<i32>,
    /// Acknowledged after `mark()` was called.
    pub acked_after_mark: usize,
    /// Error codes (None: the session itself was lost).
    pub errors: Vec<Option<u16>>,
}

static WRITERS_MARK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl NumberedWriters {
    /// `urls[w]` is writer w's connection URL.
    pub fn start(urls: Vec<String>, table: &str) -> NumberedWriters {
        use std::sync::atomic::Ordering;
        WRITERS_MARK.store(false, Ordering::Relaxed);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handles = urls
            .into_iter()
            .enumerate()
            .map(|(w, url)| {
                let stop = stop.clone();
                let sql = format!("INSERT INTO {table} (writer, seq) VALUES (?, ?)");
                std::thread::spawn(move || {
                    let connect = || mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).ok();
                    let mut conn = connect();
                    let mut r = WriterReport {
                        acked: Vec::new(),
                        acked_after_mark: 0,
                        errors: Vec::new(),
                    };
                    let mut seq = 0;
                    while !stop.load(Ordering::Relaxed) {
                        seq += 1;
                        let Some(c) = conn.as_mut() else {
                            std::thread::sleep(Duration::from_millis(50));
                            conn = connect();
                            continue;
                        };
                        match mysql::prelude::Queryable::exec_drop(c, &sql, (w, seq)) {
                            Ok(()) => {
                                r.acked.push(seq);
                                if WRITERS_MARK.load(Ordering::Relaxed) {
                                    r.acked_after_mark += 1;
                                }
                            }
                            Err(mysql::Error::MySqlError(e)) => {
                                r.errors.push(Some(e.code));
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            Err(_) => {
                                r.errors.push(None);
                                conn = None;
                            }
                        }
                    }
                    r
                })
            })
            .collect();
        NumberedWriters { stop, handles }
    }

    /// From now on, acknowledgements count as `acked_after_mark`.
    pub fn mark(&self) {
        WRITERS_MARK.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn stop(self) -> Vec<WriterReport> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handles
            .into_iter()
            .map(|h| h.join().expect("writer thread"))
            .collect()
    }
}

/// Checks what numbered writers left (writer w's rows in `table(w)`, read
/// through `reader`): every acknowledged row once, none twice, only errors
/// that say a write may not have run. Returns how many rows were
/// acknowledged.
pub fn check_numbered_rows(
    reader: &mut mysql::Conn,
    table: impl Fn(usize) -> String,
    reports: &[WriterReport],
) -> usize {
    use mysql::prelude::Queryable;
    let mut total = 0;
    for (w, r) in reports.iter().enumerate() {
        let rows: Vec<i32> = reader
            .exec(
                format!("SELECT seq FROM {} WHERE writer = ?", table(w)),
                (w,),
            )
            .unwrap();
        let present: std::collections::HashSet<i32> = rows.iter().copied().collect();
        assert_eq!(
            present.len(),
            rows.len(),
            "writer {w}: {} rows written twice",
            rows.len() - present.len()
        );
        let lost: Vec<_> = r.acked.iter().filter(|s| !present.contains(s)).collect();
        assert!(
            lost.is_empty(),
            "writer {w}: acknowledged rows lost: {lost:?}"
        );
        // 9001 no connection, 9003 may or may not have run, 9004 no
        // primary: never a silent loss.
        for e in &r.errors {
            assert!(
                matches!(e, None | Some(9001 | 9003 | 9004)),
                "writer {w}: unexpected error {e:?}"
            );
        }
        total += r.acked.len();
    }
    total
}

/// MariaDB's ed25519 plugin on every lab server, and an account using it:
/// `ed_app` / `ed-secret`, with all rights on sextant_test.
pub fn ed25519_account() {
    use mysql::prelude::Queryable;
    for &port in std::iter::once(&lab().primary).chain(&lab().replicas) {
        let mut d = direct(port);
        // Loaded already is fine; whether it is loaded is checked next.
        let _ = d.query_drop("INSTALL SONAME 'auth_ed25519'");
        let status: Option<String> = d
            .query_first(
                "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'",
            )
            .expect("plugin status");
        assert_eq!(status.as_deref(), Some("ACTIVE"), "server {port}");
    }
    let mut d = direct(lab().primary);
    d.query_drop(
        "CREATE USER IF NOT EXISTS 'ed_app'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('ed-secret')",
    )
    .expect("create ed25519 account");
    d.query_drop("GRANT ALL ON sextant_test.* TO 'ed_app'@'%'")
        .expect("grant");
    sync_replicas();
}

/// sextant in this process (its library, one worker thread), serving the
/// config `text` (which listens on `port`); returns once it listens. For
/// tests against scripted fake servers.
pub fn in_process(text: &str, port: u16) -> u16 {
    let config = sextant_config::Config::parse(text, "in-process.toml").expect("config");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        if let Err(e) = rt.block_on(sextant_proxy::run(config, None, 1)) {
            panic!("sextant: {e}");
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while !listening::listens(std::process::id(), port) {
        assert!(Instant::now() < deadline, "sextant did not listen");
        std::thread::sleep(Duration::from_millis(10));
    }
    port
}

/// One packet a scripted fake server reads from its client: (seq, payload).
pub fn fake_read(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let h = sextant_protocol::codec::parse_header(&h)
        .ok_or_else(|| std::io::Error::other("bad header"))?;
    let mut p = vec![0; h.len];
    s.read_exact(&mut p)?;
    Ok((h.seq, p))
}

/// A scripted fake server's side of a login: its greeting (as `version`,
/// in `charset`), the client's answer, accepted whatever its password (the
/// login itself is tested against MariaDB), and the OK.
pub fn fake_login(
    s: &mut TcpStream,
    version: &str,
    charset: u8,
) -> std::io::Result<sextant_protocol::handshake::HandshakeResponse> {
    let hs = sextant_protocol::handshake::InitialHandshake {
        server_version: version.into(),
        connection_id: 7,
        nonce: b"abcdefghij0123456789".to_vec(),
        capabilities: 0xdfff_ffff & !sextant_protocol::consts::cap::SSL,
        charset,
        status: 2,
        auth_plugin: "mysql_native_password".into(),
        mariadb_caps: 0,
    };
    let mut g = Vec::new();
    hs.encode(&mut g);
    let mut out = Vec::new();
    sextant_protocol::codec::write_packet(&mut out, 0, &g);
    s.write_all(&out)?;
    let (seq, p) = fake_read(s)?;
    let resp = sextant_protocol::handshake::HandshakeResponse::parse(&p)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    out.clear();
    sextant_protocol::packets::write_simple_ok(&mut out, seq + 1, 2);
    s.write_all(&out)?;
    Ok(resp)
}

/// Puts `value` under `key` in etcd through its JSON gateway, as anyone
/// who can reach etcd could (no fleet secret).
pub fn etcd_put(endpoint: &str, key: &str, value: &str) {
    use std::io::{Read, Write};
    let b64 = |s: &str| {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in s.as_bytes().chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                out.push(match i <= c.len() {
                    true => A[(n >> (18 - 6 * i) & 63) as usize] as char,
                    false => '=',
                });
            }
        }
        out
    };
    let body = format!("{{\"key\":\"{}\",\"value\":\"{}\"}}", b64(key), b64(value));
    let hostport = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(hostport).unwrap();
    write!(
        s,
        "POST /v3/kv/put HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A single-node etcd started by `scripts/lab etcd-start` in a directory
/// of its own; stopped (and removed) when dropped.
pub struct Etcd {
    pub dir: PathBuf,
    pub endpoint: String,
}

/// The fleets' shared secret in the tests.
pub const FLEET_SECRET: &str = "test-fleet-secret-0123456789";

impl Etcd {
    pub fn start() -> Etcd {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sextant-test-etcd-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut e = Etcd {
            dir,
            endpoint: String::new(),
        };
        e.lab("etcd-start");
        let env = std::fs::read_to_string(e.dir.join("etcd.env")).expect("etcd.env");
        e.endpoint = env
            .lines()
            .find_map(|l| l.strip_prefix("ETCD_ENDPOINT="))
            .expect("ETCD_ENDPOINT")
            .to_string();
        e
    }

    /// Stops etcd, keeping its data and port (`resume` brings it back).
    pub fn stop(&self) {
        self.lab("etcd-stop");
    }

    pub fn resume(&self) {
        self.lab("etcd-start");
    }

    fn lab(&self, what: &str) {
        let out = Command::new(repo_root().join("scripts/lab"))
            .args([what, "--base-port", "auto", "--dir"])
            .arg(&self.dir)
            .output()
            .expect("cannot run scripts/lab");
        assert!(
            out.status.success(),
            "scripts/lab {what} failed (is etcd-server installed? scripts/deps installs it):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A `[cluster]` table for an instance of fleet `name` on this etcd.
    pub fn cluster(&self, name: &str, id: &str) -> String {
        let state = self.dir.join(format!("state-{id}"));
        format!(
            "\n[cluster]\netcd = [\"{}\"]\nname = \"{name}\"\ninstance_id = \"{id}\"\nstate_dir = \"{}\"\nsecret = \"{FLEET_SECRET}\"\n",
            self.endpoint,
            state.display()
        )
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/lab"))
            .args(["stop", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

/// HAProxy from `examples/fleet/haproxy.cfg`, its addresses replaced: it
/// listens on `port` and balances over `instances` (each started with an
/// HTTP port, for the /readyz check, and with `proxy_protocol_from`
/// trusting 127.0.0.1). Stopped when dropped.
pub struct HaProxy {
    child: Child,
    pub port: u16,
}

impl HaProxy {
    pub fn start(instances: &[&Proxy]) -> HaProxy {
        let port = free_port();
        let example = std::fs::read_to_string(repo_root().join("examples/fleet/haproxy.cfg"))
            .expect("examples/fleet/haproxy.cfg");
        let mut cfg = String::new();
        for line in example.lines() {
            match line.trim_start() {
                l if l.starts_with("bind ") => {
                    cfg.push_str(&format!("    bind 127.0.0.1:{port}\n"))
                }
                l if l.starts_with("server sextant1 ") => {
                    for (i, p) in instances.iter().enumerate() {
                        let http = p
                            .http_port
                            .expect("an instance behind HAProxy needs http: true");
                        cfg.push_str(&format!(
                            "    server sextant{} 127.0.0.1:{} check port {http}\n",
                            i + 1,
                            p.port
                        ));
                    }
                }
                l if l.starts_with("server ") => {}
                _ => {
                    cfg.push_str(line);
                    cfg.push('\n');
                }
            }
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("haproxy");
        std::fs::create_dir_all(&dir).expect("haproxy dir");
        let path = dir.join(format!("haproxy-{port}.cfg"));
        std::fs::write(&path, cfg).expect("haproxy config");
        let child = Command::new("haproxy")
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy (installed by scripts/deps)");
        let h = HaProxy { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !listening::listens(h.child.id(), port) {
            assert!(
                Instant::now() < deadline,
                "haproxy did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        h
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Headless Chromium (Debian's package) at `url`: what it prints (with
/// `--dump-dom`, the page as its scripts left it), after `extra` options.
pub fn chromium(url: &str, extra: &[&str]) -> String {
    let profile = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chromium-profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=4000",
            "--window-size=1280,800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium (scripts/deps installs it)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
