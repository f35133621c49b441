//! The configuration file. Every key has a default that suits most users;
//! an unknown key is an error (typo protection), and every error names the
//! file, the line and the key, and says what was expected.

mod addr;
mod admin;
mod check;
mod cluster;
mod error;
mod failover;
pub mod files;
mod groups;
mod log;
mod monitor;
mod proxy;
mod routing;
mod secrets;
mod sharding;
mod users;
mod xa;

pub use addr::Addr;
pub use admin::Admin;
pub use cluster::{valid_id, Cluster};
pub use error::ConfigError;
pub use failover::FailoverMode;
pub use groups::{
    Balance, Group, Replica, Topology, DEFAULT_PIPELINE_CONNECTIONS, DEFAULT_PIPELINE_DEPTH,
    MAX_GROUP_SERVERS,
};
pub use log::{Log, LogFormat};
pub use monitor::Monitor;
pub use proxy::{parse_network, AuthPlugin, FullAuth, Proxy};
pub use routing::{Consistency, ConsistencyScope, Routing, RoutingOverride, RoutingPolicy};
pub use secrets::is_native_hash;
pub use sharding::{SequenceConfig, Sharding, UnlistedRule};
pub use users::{User, UserAuthPlugin};
pub use xa::Xa;

use check::Checker;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub proxy: Proxy,
    #[serde(default)]
    pub admin: Option<Admin>,
    #[serde(default)]
    pub users: Vec<User>,
    #[serde(default)]
    pub groups: BTreeMap<String, Group>,
    #[serde(default)]
    pub routing: Routing,
    #[serde(default)]
    pub monitor: Monitor,
    #[serde(default)]
    pub sharding: Option<Sharding>,
    #[serde(default)]
    pub xa: Xa,
    #[serde(default)]
    pub log: Log,
    /// A fleet of instances sharing intent through etcd (none: this
    /// instance stands alone).
    #[serde(default)]
    pub cluster: Option<Cluster>,
    /// The sharding layout `[sharding]` describes, read and checked with
    /// the rest.
    #[serde(skip)]
    pub layout: Option<sextant_sharding::Layout>,
}

fn yes() -> bool {
    true
}

fn default_true() -> bool {
    true
}

/// A setting's enum value as the file writes it: its variant in
/// snake_case (`LeastLatency` -> `least_latency`).
pub fn file_name(v: &dyn std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{v:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// A TOML error as its line, column, key and message; quoted text in the
/// message that is not a key name (lower-case words) is left out, and so
/// is the line itself, which toml's own text shows: a file that is not a
/// config (a private key, /etc/shadow) must not be shown back.
fn without_content(text: &str, e: &toml::de::Error) -> String {
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 40
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
    };
    let mut out = String::from("TOML parse error");
    if let Some(sp) = e.span() {
        let before = &text[..sp.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        out += &format!(" at line {line}, column {column}");
        let key = text
            .lines()
            .nth(line - 1)
            .and_then(|l| l.split_once('='))
            .map(|(k, _)| k.trim().trim_matches('"'));
        if let Some(k) = key.filter(|k| plain(k)) {
            out += &format!(", key `{k}`");
        }
    }
    out += ": ";
    for (i, part) in e.message().trim_end().split('`').enumerate() {
        match i % 2 {
            0 => out.push_str(part),
            _ if plain(part) => {
                out.push('`');
                out.push_str(part);
                out.push('`');
            }
            _ => out.push_str("(text not shown)"),
        }
    }
    out.replace('\n', "; ")
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text = files::read_bounded(path, files::MAX_CONFIG_BYTES).map_err(|source| {
            ConfigError::Read {
                path: p.clone(),
                source,
            }
        })?;
        Config::parse(&text, &p)
    }

    /// Parses and validates `text`; `path` is only used in messages (and
    /// to find a Cetus sharding file named relative to it).
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let mut cfg: Config = match toml::from_str(text) {
            Ok(c) => c,
            Err(e) => return Err(Self::every_parse_error(text, path, e)),
        };
        cfg.validate(text, path)?;
        if let Some(sh) = &cfg.sharding {
            let layout = sh.layout(text, path)?;
            let defined: Vec<&str> = cfg.groups.keys().map(String::as_str).collect();
            let missing = layout.undefined_groups(&defined);
            if !missing.is_empty() {
                return Err(ConfigError::Invalid {
                    path: path.to_string(),
                    line: None,
                    key: "sharding".into(),
                    message: format!(
                        "the layout places rows in group(s) {}, which [groups] does not define",
                        missing.join(", ")
                    ),
                });
            }
            cfg.layout = Some(layout);
        }
        Ok(cfg)
    }

    /// Every problem of a file that does not parse, not just the first:
    /// the line of each error is blanked out (an unknown key) or its value
    /// replaced by one of another type (a bad value of a key that must be
    /// there), and the rest parsed again; then what parses is checked too,
    /// leaving out what it says of the replaced values. Stops where that
    /// cannot help (a broken table header, a value over several lines).
    fn every_parse_error(text: &str, path: &str, first: toml::de::Error) -> ConfigError {
        // toml's own text shows the line it could not read: a file that
        // is not a config (a key, /etc/shadow) must not be shown back.
        let parse_error = |e: &toml::de::Error| ConfigError::Parse {
            path: path.to_string(),
            message: without_content(text, e),
        };
        // The line (0-based) an error points at, in the text it came from.
        let line_of = |e: &toml::de::Error, t: &str| {
            e.span()
                .map(|sp| t[..sp.start.min(t.len())].matches('\n').count())
        };
        let mut errors = vec![parse_error(&first)];
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // Lines whose values sextant replaced: checks of them are not the
        // user's problem.
        let mut replaced: Vec<usize> = Vec::new();
        let mut blanked: Vec<String> = Vec::new();
        let mut next = first;
        // The text `next` came from (spans are offsets into it).
        let mut current = text.to_string();
        'errors: for _ in 0..50 {
            let Some(line) = line_of(&next, &current) else {
                break;
            };
            let Some(original) = lines.get(line).cloned() else {
                break;
            };
            let t = original.trim_start();
            if t.is_empty() || t.starts_with('[') || t.starts_with('#') {
                break;
            }
            let key = t.split_once('=').map(|(k, _)| k.trim().to_string());
            if let Some(k) = &key {
                blanked.push(k.trim_matches('"').to_string());
            }
            // Without the line first; then the key with a value of each
            // type, for a key that must be there.
            let mut candidates = vec![String::new()];
            if let Some(k) = &key {
                for v in ["\"\"", "0", "false", "[]", "{}"] {
                    candidates.push(format!("{k} = {v}"));
                }
            }
            for (n, candidate) in candidates.into_iter().enumerate() {
                lines[line] = candidate;
                let rest = lines.join("\n");
                match toml::from_str::<Config>(&rest) {
                    Ok(cfg) => {
                        if n > 0 {
                            replaced.push(line + 1);
                        }
                        let mut more = Vec::new();
                        cfg.check(&rest, path, &mut more);
                        errors.extend(more.into_iter().filter(|e| {
                            !matches!(e, ConfigError::Invalid { line: Some(l), .. } if replaced.contains(l))
                        }));
                        break 'errors;
                    }
                    Err(e) => {
                        let missing = blanked
                            .iter()
                            .any(|k| e.message().contains(&format!("missing field `{k}`")));
                        if missing || line_of(&e, &rest) == Some(line) {
                            // This replacement does not get past the line.
                            continue;
                        }
                        if n > 0 {
                            replaced.push(line + 1);
                        }
                        errors.push(parse_error(&e));
                        next = e;
                        current = rest;
                        continue 'errors;
                    }
                }
            }
            break;
        }
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Several(errors),
        }
    }

    /// The keys each instance of a fleet keeps from its own file when a
    /// config is pushed to all of them (`[cluster]`): what names this host
    /// (listen addresses, TLS and RSA files, the trusted balancers, the
    /// admin port and its login), the fleet itself, and the transaction
    /// coordinator's log and id.
    pub const LOCAL_KEYS: &'static [&'static str] = &[
        "[proxy] listen",
        "[proxy] tls_cert, tls_key, rsa_key",
        "[proxy] proxy_protocol_from",
        "[admin]",
        "[cluster]",
        "[xa] log_dir, instance_id",
    ];

    /// `pushed` (a fleet's config) with this instance's [`Config::LOCAL_KEYS`]
    /// taken from `local` (its own file).
    pub fn with_local_keys(mut pushed: Config, local: &Config) -> Config {
        pushed.proxy.listen = local.proxy.listen.clone();
        pushed.proxy.tls_cert = local.proxy.tls_cert.clone();
        pushed.proxy.tls_key = local.proxy.tls_key.clone();
        pushed.proxy.rsa_key = local.proxy.rsa_key.clone();
        pushed.proxy.proxy_protocol_from = local.proxy.proxy_protocol_from.clone();
        pushed.admin = local.admin.clone();
        pushed.cluster = local.cluster.clone();
        pushed.xa.log_dir = local.xa.log_dir.clone();
        pushed.xa.instance_id = local.xa.instance_id.clone();
        pushed
    }

    /// A routing key's name in the file (Cetus's names mapped to
    /// sextant's).
    pub fn routing_key(key: &str) -> String {
        match key.to_ascii_lowercase().as_str() {
            "master-preferred" | "master_preferred" => "primary_preferred".into(),
            "read-master-percentage" | "read_master_percentage" => "read_primary_percent".into(),
            k => k.to_string(),
        }
    }

    /// Checks a config changed in memory (the admin port's SET), as a
    /// file is checked (without line numbers: there is no file).
    pub fn recheck(&self) -> Result<(), ConfigError> {
        self.validate("", "(running config)")
    }

    fn validate(&self, text: &str, path: &str) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        self.check(text, path, &mut errors);
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    /// Every problem, not just the first: a user fixing a config should
    /// see all of them at once. Each section checks itself.
    fn check(&self, text: &str, path: &str, errors: &mut Vec<ConfigError>) {
        let mut c = Checker::new(text, path, errors);
        if self.groups.is_empty() {
            c.err(
                "",
                "groups",
                "no server group is defined; add e.g. [groups.main] with primary = \"127.0.0.1:3306\"".into(),
            );
        }
        if self.users.is_empty() {
            c.err(
                "",
                "users",
                "no user is defined; add a [[users]] entry with name and password".into(),
            );
        }
        self.xa.check(&mut c);
        users::check(&self.users, self, &mut c);
        self.monitor.check(&mut c);
        self.proxy.check(self, &mut c);
        groups::check(&self.groups, &self.routing, &mut c);
        failover::check_config(self, &mut c);
        self.log.check(&mut c);
        if let Some(cl) = &self.cluster {
            cl.check(&mut c);
        }
    }

    /// The group a user's statements go to.
    pub fn group_for<'a>(&'a self, user: &'a User) -> &'a str {
        user.default_group
            .as_deref()
            .or(self.proxy.default_group.as_deref())
            .or_else(|| self.groups.keys().next().map(|s| s.as_str()))
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_EXAMPLE: &str = r#"
[proxy]
listen = "127.0.0.1:6033"
# threads = 0                      # 0 = one per core

[admin]
listen = "127.0.0.1:6032"           # MySQL-protocol admin port
user = "admin"
password = "adminpass"

[[users]]
name = "app"
password = "apppass"                # what the client presents to the proxy

[groups.main]
primary  = "127.0.0.1:3307"
replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]   # an entry may also be { addr = "127.0.0.1:3308", weight = 2 }
"#;

    #[test]
    fn pipelining_is_on_unless_set_off_or_the_servers_speak_tls() {
        let with = |extra: &str| {
            let text = format!("{ISSUE_EXAMPLE}{extra}");
            let c = Config::parse(&text, "x.toml").unwrap();
            let g = &c.groups["main"];
            (g.pipeline(), g.pipeline_connections())
        };
        let n = DEFAULT_PIPELINE_CONNECTIONS;
        assert_eq!(with(""), (DEFAULT_PIPELINE_DEPTH, n));
        assert_eq!(with("pipeline_depth = 0\n"), (0, n));
        assert_eq!(with("pipeline_depth = 4\n"), (4, n));
        assert_eq!(
            with("pipeline_connections = 3\n"),
            (DEFAULT_PIPELINE_DEPTH, 3)
        );
        assert_eq!(with("tls = true\n").0, 0);
        // A pool of one connection has one to pipeline on; a small pool
        // set with a depth is no error while the connections are the
        // default.
        assert_eq!(with("pool_max = 1\n"), (DEFAULT_PIPELINE_DEPTH, 1));
        assert_eq!(with("pool_max = 4\npipeline_depth = 8\n"), (8, 4));
    }

    #[test]
    fn the_documented_example_parses() {
        let c = Config::parse(ISSUE_EXAMPLE, "x.toml").unwrap();
        let g = &c.groups["main"];
        assert_eq!(g.primary.0, "127.0.0.1:3307");
        assert_eq!(g.replicas.len(), 2);
        assert_eq!(g.pool_max, 200);
        assert_eq!(c.routing.hold_ms, 256);
        assert_eq!(c.users[0].backend_user(), "app");
        assert_eq!(c.group_for(&c.users[0]), "main");
        assert_eq!(c.admin.unwrap().user, "admin");
    }

    #[test]
    fn weighted_replicas() {
        let t = ISSUE_EXAMPLE.replace(
            r#"replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]"#,
            r#"replicas = [{ addr = "127.0.0.1:3308", weight = 2 }, "127.0.0.1:3309"]"#,
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        assert_eq!(c.groups["main"].replicas[0].weight, 2);
        assert_eq!(c.groups["main"].replicas[1].weight, 1);
    }

    #[test]
    fn servers_on_unix_sockets() {
        let t = ISSUE_EXAMPLE.replace(
            r#"replicas = ["127.0.0.1:3308", "127.0.0.1:3309"]"#,
            r#"replicas = ["/run/mysqld/r1.sock", { addr = "/run/mysqld/r2.sock", weight = 2 }]"#,
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let g = &c.groups["main"];
        assert!(g.replicas[0].addr.is_unix_path());
        assert_eq!(g.replicas[1].addr.0, "/run/mysqld/r2.sock");
        assert_eq!(g.replicas[1].weight, 2);
        assert!(!g.primary.is_unix_path());
    }

    fn err_of(text: &str) -> String {
        Config::parse(text, "sextant.toml").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // Each case: a change to the example, and what the message must say.
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "primary  =",
                "prmary  =",
                &["sextant.toml", "line 16", "prmary", "primary"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"127.0.0.1\"",
                &["line 3", "host:port"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"127.0.0.1:99999\"",
                &["line 3", "65535"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"127.0.0.1:6033\"\nproxy_protocol_from = [\"10.0.0.0/8\", \"10.0.0.0/33\"]",
                &["sextant.toml:4", "proxy.proxy_protocol_from", "10.0.0.0/33", "not a network"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npool_max = 0",
                &["sextant.toml:16", "groups.main.pool_max", "at least 1"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npool_min = 500",
                &["groups.main.pool_min", "more than pool_max"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 8\npipeline_connections = 0",
                &["groups.main.pipeline_connections", "from 1 to pool_max"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 8\ntls = true",
                &["groups.main.pipeline_depth", "TLS"],
            ),
            (
                "[groups.main]",
                "[groups.main]\npipeline_depth = 64",
                &["groups.main.pipeline_depth", "more than 16"],
            ),
            (
                "\"127.0.0.1:3309\"]",
                "{ addr = \"127.0.0.1:3309\", weight = 0 }]",
                &["weight 0"],
            ),
            (
                "\"127.0.0.1:3309\"]",
                "{ adr = \"127.0.0.1:3309\" }]",
                &["line 17", "replica is"],
            ),
            (
                "[proxy]",
                "[proxy]\nthreads = \"four\"",
                &["line 3", "threads", "expected usize"],
            ),
            (
                "listen = \"127.0.0.1:6033\"",
                "listen = \"/tmp/sextant.sock\"",
                &["proxy.listen", "TCP only"],
            ),
            (
                "primary  = \"127.0.0.1:3307\"",
                "primary  = \"/run/mysqld/mysqld.sock\"\ntls = true",
                &["groups.main.tls", "Unix socket"],
            ),
            (
                "primary  = \"127.0.0.1:3307\"",
                "primary  = \"/\"",
                &["line 16", "Unix socket path"],
            ),
        ];
        for (from, to, want) in cases {
            assert!(ISSUE_EXAMPLE.contains(from), "{from}");
            let msg = err_of(&ISSUE_EXAMPLE.replacen(from, to, 1));
            for w in *want {
                assert!(msg.contains(w), "message for {to:?} lacks {w:?}:\n{msg}");
            }
        }
    }

    #[test]
    fn routing_keys_and_cetus_aliases() {
        let t = format!(
            "{ISSUE_EXAMPLE}\n[routing]\nread-master-percentage = 30\nmaster-preferred = true\nbalance = \"least_latency\"\n"
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let p = c.routing.policy();
        assert_eq!(p.read_primary_percent, 30);
        assert!(p.primary_preferred);
        assert_eq!(p.balance, Balance::LeastLatency);
        assert!(p.read_only_transactions_on_replicas);
        let t = format!("{ISSUE_EXAMPLE}\n[routing]\nread_primary_percent = 101\n");
        assert!(err_of(&t).contains("0 to 100"));
        let t = format!("{ISSUE_EXAMPLE}\n[routing]\nbalance = \"random\"\n");
        assert!(err_of(&t).contains("round_robin"));
        let t = ISSUE_EXAMPLE.replace(
            "password = \"apppass\"",
            "password = \"apppass\"\nrouting = { read_primary_percent = 100 }",
        );
        let c = Config::parse(&t, "x.toml").unwrap();
        let p = c.routing.policy().with(&c.users[0].routing);
        assert_eq!(p.read_primary_percent, 100);
        assert!(!p.primary_preferred);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let t = ISSUE_EXAMPLE
            .replace(
                "[groups.main]",
                "[groups.main]\npool_max = 0\nconnect_timeout_ms = 0",
            )
            .replace("[proxy]", "[proxy]\nrequire_tls = true");
        let msg = err_of(&t);
        for want in ["pool_max", "connect_timeout_ms", "require_tls"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        assert_eq!(msg.lines().count(), 3, "{msg}");
    }

    #[test]
    fn every_parse_error_is_reported_at_once() {
        let t = ISSUE_EXAMPLE
            .replace("[proxy]", "[proxy]\nlisten_typo = 1\nthreads = \"four\"")
            .replace("[groups.main]", "[groups.main]\npool_mx = 3\npool_max = 0");
        let msg = err_of(&t);
        for want in ["listen_typo", "threads", "pool_mx", "pool_max"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        // Three mistakes in three sections, one of them a bad value of a
        // key that must be there: all three named.
        let t = ISSUE_EXAMPLE
            .replace("[proxy]", "[proxy]\nbogus_key = 1")
            .replace("password = \"adminpass\"", "password = 5")
            .replace(
                "password = \"apppass\"",
                "password = \"apppass\"\ncolour = \"blue\"",
            );
        let msg = err_of(&t);
        for want in ["bogus_key", "password", "colour"] {
            assert!(msg.contains(want), "{want} missing from:\n{msg}");
        }
        assert_eq!(msg.matches("TOML parse error").count(), 3, "{msg}");
        // A bad value of a required key: reported once, not as missing too.
        let t = ISSUE_EXAMPLE.replace("primary  = \"127.0.0.1:3307\"", "primary = 3307");
        let msg = err_of(&t);
        assert!(!msg.contains("missing field"), "{msg}");
    }

    #[test]
    fn two_listeners_on_one_address_are_refused() {
        let t = ISSUE_EXAMPLE.replace("127.0.0.1:6032", "127.0.0.1:6033");
        let msg = err_of(&t);
        assert!(
            msg.contains("admin.listen") && msg.contains("also [proxy] listen"),
            "{msg}"
        );
    }

    #[test]
    fn log_levels_are_checked() {
        let ok = format!(
            "{ISSUE_EXAMPLE}\n[log]\nlevel = \"info, sextant_monitor=debug\"\nformat = \"json\"\n"
        );
        assert!(Config::parse(&ok, "x.toml").is_ok());
        let bad = format!("{ISSUE_EXAMPLE}\n[log]\nlevel = \"loud\"\n");
        assert!(err_of(&bad).contains("log.level"));
        let bad = format!("{ISSUE_EXAMPLE}\n[log]\nlevel = \"info,sextant monitor=debug\"\n");
        assert!(err_of(&bad).contains("log.level"));
    }

    #[test]
    fn passwords_from_the_environment_files_and_hashes() {
        let dir = std::env::temp_dir().join(format!("sextant-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "from-a-file\n").unwrap();
        std::env::set_var("SEXTANT_TEST_SECRET_PW", "from-the-env");
        let t = ISSUE_EXAMPLE
            .replace(
                "password = \"apppass\"",
                &format!(
                    "password = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"\nbackend_password = {{ file = {:?} }}",
                    file.display().to_string()
                ),
            )
            .replace(
                "password = \"adminpass\"",
                "password = { env = \"SEXTANT_TEST_SECRET_PW\" }",
            );
        let c = Config::parse(&t, "x.toml").unwrap();
        assert_eq!(
            c.users[0].password,
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
        assert_eq!(c.users[0].backend_password(), "from-a-file");
        assert_eq!(c.admin.as_ref().unwrap().password, "from-the-env");
        // A missing variable or file is an error at its line.
        let missing = t.replace("SEXTANT_TEST_SECRET_PW", "SEXTANT_TEST_NO_SUCH_VAR");
        let msg = err_of(&missing);
        assert!(
            msg.contains("SEXTANT_TEST_NO_SUCH_VAR") && msg.contains("not set"),
            "{msg}"
        );
        let gone = t.replace(&file.display().to_string(), "/nonexistent/pw");
        assert!(err_of(&gone).contains("cannot read the password file"));
        // A hash alone cannot log in to the servers.
        let hash_only = ISSUE_EXAMPLE.replace(
            "password = \"apppass\"",
            "password = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\"",
        );
        assert!(err_of(&hash_only).contains("backend_password"));
        assert!(is_native_hash("*2470c0c06dee42fd1618bb99005adca2ec9d1e19"));
        assert!(!is_native_hash("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn routing_keys_are_set_from_admin_text() {
        let mut r = Routing::default();
        r.set("balance", "least_latency").unwrap();
        assert_eq!(r.get("balance").as_deref(), Some("least_latency"));
        r.set("balance", "'weighted'").unwrap();
        assert_eq!(r.balance, Balance::Weighted);
        r.set("master-preferred", "ON").unwrap();
        assert!(r.primary_preferred);
        r.set("primary_preferred", "0").unwrap();
        assert!(!r.primary_preferred);
        r.set("read-master-percentage", "30").unwrap();
        assert_eq!(r.read_primary_percent, 30);
        assert!(r.set("read_primary_percent", "130").is_err());
        assert!(r.set("balance", "fastest").unwrap_err().contains("balance"));
        assert!(r
            .set("no_such", "1")
            .unwrap_err()
            .contains("unknown routing key"));
        r.set("consistency", "\"strong\"").unwrap();
        assert_eq!(r.get("consistency").as_deref(), Some("strong"));
        assert_eq!(r.get("consistency_scope").as_deref(), Some("user"));
        assert_eq!(r.get("causal_wait_ms").as_deref(), Some("50"));
    }

    #[test]
    fn structural_errors() {
        assert!(err_of("[proxy]\n").contains("no server group"));
        assert!(err_of("[groups.a]\nprimary=\"h:1\"\n").contains("no user"));
        let two = format!("{ISSUE_EXAMPLE}\n[groups.other]\nprimary = \"127.0.0.1:4000\"\n");
        assert!(err_of(&two).contains("default_group"));
        let dup = format!("{ISSUE_EXAMPLE}\n[[users]]\nname = \"app\"\n");
        assert!(err_of(&dup).contains("defined twice"));
    }
}
