//! Admin commands. Each answers with a table (or an error message); the
//! server binary speaks the protocol around them.

pub mod commands;
pub mod metrics;
pub mod traffic;

pub use commands::schema_diff;
use sextant_backend::Pool;
use sextant_config::RoutingPolicy;

#[derive(Clone, Debug)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

pub enum Answer {
    Table(Table),
    /// `SWITCHOVER GROUP g [TO 'addr']`: for the proxy to ask the group's
    /// failover task, and wait for the outcome.
    Switchover {
        group: String,
        to: Option<String>,
    },
    Ok,
    Error(String),
    /// `SET` of a name that is neither a routing key nor a variable a
    /// client library sets on connect: the message says which keys exist
    /// (1193, as a server answers an unknown system variable).
    UnknownVariable(String),
    /// `KILL [QUERY | CONNECTION] id [AS 'user']`: for the proxy to carry
    /// out (as `user` would be allowed to, when given).
    Kill {
        id: u32,
        query_only: bool,
        as_user: Option<String>,
    },
    /// `SHOW SHARD SCHEMA DIFF table`: for the proxy to ask each group
    /// holding the table for its definition, and compare them with
    /// [`schema_diff`].
    ShardSchema {
        db: String,
        table: String,
        groups: Vec<String>,
    },
    /// `SHOW XA`: for the proxy to list its coordinator's transactions in
    /// doubt.
    ShowXa,
    /// `SHOW ACCOUNTS`: for the proxy to read each user's server account's
    /// grants and say what it reaches beyond its own schemas.
    ShowAccounts,
    /// `XA COMMIT | ROLLBACK 'gtrid'`: for the proxy to resolve one
    /// distributed transaction's prepared branches by hand.
    XaResolve {
        gtrid: String,
        commit: bool,
    },
    /// `RELOAD CONFIG`: for the proxy to read its config file again.
    Reload,
    /// `SET <routing key> = <value>`: for the proxy to apply to the
    /// running config.
    SetRouting {
        key: String,
        value: String,
    },
    /// `SET BACKEND '<addr>' STATE <state>` of a server the pool has: for
    /// the proxy to apply here, or to the whole fleet.
    SetBackend {
        addr: String,
        state: String,
    },
    /// `PUSH CONFIG [FROM '<file>'] [BASED ON <revision>]`: for the proxy
    /// to validate the file and store it as the fleet's config.
    PushConfig {
        path: Option<String>,
        base: Option<i64>,
    },
    /// `SHOW FLEET SESSIONS`: for the proxy to gather every instance's
    /// sessions.
    ShowFleetSessions,
    /// `SHOW FLEET`: for the proxy to list the fleet's instances (formatted
    /// by [`commands::fleet::table`]).
    ShowFleet,
    /// `SHOW QUERY DIGESTS`: for the proxy to gather its threads' digests
    /// (formatted by [`commands::digests::table`]).
    ShowDigests,
    /// `RESET QUERY DIGESTS`.
    ResetDigests,
}

/// One client session, as SHOW SESSIONS lists it.
pub struct SessionRow {
    pub id: u32,
    pub user: String,
    pub client: String,
    pub group: String,
    /// The server and server thread running its statement now.
    pub running: Option<(String, u32)>,
}

/// Process-wide counters the admin port reports.
/// Why a transaction was not replayed, as SHOW STATUS and metrics name
/// it: state a new connection would not have (temporary tables, locks),
/// a user variable, a session setting changed inside it, a statement
/// sextant does not replay, a prepared statement, a record past its
/// bounds, anything else.
pub const REPLAY_REFUSALS: [&str; 7] = [
    "connection_state",
    "user_variable",
    "session_change",
    "statement",
    "prepared_statement",
    "size",
    "other",
];

#[derive(Default)]
pub struct Counters {
    pub client_connections: std::sync::atomic::AtomicUsize,
    pub client_connections_total: std::sync::atomic::AtomicU64,
    pub queries: std::sync::atomic::AtomicU64,
    pub client_errors: std::sync::atomic::AtomicU64,
    /// Distributed transactions (a sharded layout's): committed in one
    /// phase (one group touched), by two-phase commit, rolled back (by the
    /// client or a failure), and branches recovery resolved.
    pub xa_one_phase: std::sync::atomic::AtomicU64,
    pub xa_two_phase: std::sync::atomic::AtomicU64,
    pub xa_rolled_back: std::sync::atomic::AtomicU64,
    pub xa_recovered_branches: std::sync::atomic::AtomicU64,
    /// Transactions whose server connection was lost, run again on a new
    /// one: attempted, and how they ended (replayed; an answer differed;
    /// refused for what they held; the new connection failed).
    pub replays: std::sync::atomic::AtomicU64,
    pub replays_done: std::sync::atomic::AtomicU64,
    pub replays_mismatched: std::sync::atomic::AtomicU64,
    pub replays_refused: std::sync::atomic::AtomicU64,
    /// Refused replays by reason (`REPLAY_REFUSALS`).
    pub replays_refused_by: [std::sync::atomic::AtomicU64; REPLAY_REFUSALS.len()],
    pub replays_failed: std::sync::atomic::AtomicU64,
    /// Heap allocations since start, when counting is on
    /// (SEXTANT_COUNT_ALLOCATIONS=1).
    pub allocations: Option<&'static std::sync::atomic::AtomicU64>,
}

/// What admin commands can see.
pub struct Context<'a> {
    pub pool: &'a Pool,
    pub counters: &'a Counters,
    /// Each user's routing policy and group.
    pub users: Vec<(&'a str, RoutingPolicy, &'a str)>,
    /// The client sessions now (asked only by SHOW SESSIONS).
    pub sessions: &'a dyn Fn() -> Vec<SessionRow>,
    /// The sharding layout's router, if the config has one.
    pub sharding: Option<&'a sextant_sharding::Router>,
    /// Each user's sessions open now, and the commands its sessions sent.
    pub user_sessions: Vec<(&'a str, usize, u64)>,
    /// The running config.
    pub config: &'a sextant_config::Config,
}

/// Runs one admin command: the first of [`commands::COMMANDS`] that
/// recognises it answers.
pub fn execute(sql: &str, ctx: &Context<'_>) -> Answer {
    let q = commands::Query::new(sql);
    if q.words.is_empty() {
        return Answer::Error("empty command".into());
    }
    for c in commands::COMMANDS {
        if let Some(a) = c.run(&q, ctx) {
            return a;
        }
    }
    Answer::Error(format!(
        "unknown admin command {sql:?}; HELP lists the commands"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_diffs_name_the_odd_group() {
        let t = schema_diff(&[
            (
                "data1".into(),
                Ok("CREATE TABLE `t` (\n `id` int) ENGINE=InnoDB AUTO_INCREMENT=5".into()),
            ),
            (
                "data2".into(),
                Ok("CREATE TABLE `t` (\n `id` int) ENGINE=InnoDB AUTO_INCREMENT=9".into()),
            ),
            (
                "data3".into(),
                Ok("CREATE TABLE `t` (\n `id` bigint) ENGINE=InnoDB".into()),
            ),
            (
                "data4".into(),
                Err("1146: Table 'd.t' doesn't exist".into()),
            ),
        ]);
        let status: Vec<&str> = t.rows.iter().map(|r| r[1].as_deref().unwrap()).collect();
        assert_eq!(
            status,
            [
                "same",
                "same",
                "differs",
                "missing: 1146: Table 'd.t' doesn't exist"
            ]
        );
    }

    #[test]
    fn unknown_commands_list_the_known_ones() {
        let pool = Pool::default();
        let c = Counters::default();
        let config = sextant_config::Config::parse(
            "[[users]]\nname = \"app\"\npassword = \"x\"\n[groups.main]\nprimary = \"127.0.0.1:3307\"\n",
            "t.toml",
        )
        .unwrap();
        let ctx = Context {
            config: &config,
            pool: &pool,
            counters: &c,
            users: vec![("app", RoutingPolicy::default(), "main")],
            sessions: &|| {
                vec![SessionRow {
                    id: 7,
                    user: "app".into(),
                    client: "127.0.0.1:5000".into(),
                    group: "main".into(),
                    running: Some(("127.0.0.1:3307".into(), 99)),
                }]
            },
            sharding: None,
            user_sessions: vec![("app", 1, 5)],
        };
        match execute("show sessions", &ctx) {
            Answer::Table(t) => assert_eq!(
                t.rows,
                vec![[
                    "7",
                    "app",
                    "127.0.0.1:5000",
                    "main",
                    "running",
                    "127.0.0.1:3307",
                    "99"
                ]
                .map(|v| Some(v.to_string()))
                .to_vec()]
            ),
            _ => panic!("expected a table"),
        }
        // What client libraries SET on connect is answered OK; a name the
        // admin port does not know is refused with the keys it does.
        for sql in [
            "SET NAMES utf8mb4",
            "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci, autocommit=1",
            "SET CHARACTER SET utf8",
            "set autocommit=1",
            "SET character_set_results = NULL",
            "SET @@session.sql_mode = 'STRICT_TRANS_TABLES,NO_ZERO_DATE'",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "SET @x = 1",
            "SET net_write_timeout=600",
            "SET session_track_schema = 1",
        ] {
            assert!(matches!(execute(sql, &ctx), Answer::Ok), "{sql}");
        }
        for (sql, name) in [
            ("SET totally_bogus_key = 'x'", "totally_bogus_key"),
            ("SET autocommit = 1, hold_msec = 5", "hold_msec"),
            ("SET GLOBAL consistensy = 'strong'", "consistensy"),
        ] {
            match execute(sql, &ctx) {
                Answer::UnknownVariable(m) => {
                    assert!(m.contains(&format!("'{name}'")), "{m}");
                    assert!(m.contains("causal_wait_ms"), "the keys are listed: {m}");
                }
                _ => panic!("{sql}: expected an unknown variable"),
            }
        }
        assert!(matches!(
            execute("SET hold_ms = 100", &ctx),
            Answer::SetRouting { .. }
        ));
        assert!(matches!(
            execute("KILL QUERY 7", &ctx),
            Answer::Kill {
                id: 7,
                query_only: true,
                as_user: None
            }
        ));
        assert!(matches!(
            execute("kill 8;", &ctx),
            Answer::Kill {
                id: 8,
                query_only: false,
                as_user: None
            }
        ));
        assert!(matches!(execute("KILL USER app", &ctx), Answer::Error(_)));
        match execute("DROP EVERYTHING", &ctx) {
            Answer::Error(m) => assert!(m.contains("HELP"), "{m}"),
            _ => panic!("expected an error"),
        }
        // HELP lists every command of the registry.
        match execute("help", &ctx) {
            Answer::Table(t) => {
                assert_eq!(t.rows.len(), commands::COMMANDS.len());
                for want in [
                    "SHOW BACKENDS",
                    "SET BACKEND",
                    "SHOW VARIABLES",
                    "SHOW CONFIG",
                    "RELOAD CONFIG",
                    "KILL",
                ] {
                    assert!(
                        t.rows
                            .iter()
                            .any(|r| r[0].as_deref().is_some_and(|c| c.starts_with(want))),
                        "HELP lacks {want}"
                    );
                }
            }
            _ => panic!("expected a table"),
        }
        // Routing keys: SET names one (Cetus's names too), other SETs are
        // client-library noise.
        match execute("SET `master-preferred` = ON", &ctx) {
            Answer::SetRouting { key, value } => {
                assert_eq!((key.as_str(), value.as_str()), ("primary_preferred", "ON"))
            }
            _ => panic!("expected SetRouting"),
        }
        assert!(matches!(execute("SET NAMES utf8mb4", &ctx), Answer::Ok));
        match execute("SHOW VARIABLES", &ctx) {
            Answer::Table(t) => {
                assert!(t.rows.iter().any(|r| r[0].as_deref() == Some("balance")
                    && r[1].as_deref() == Some("round_robin")))
            }
            _ => panic!("expected a table"),
        }
        match execute("SET BACKEND '10.0.0.9:3306' STATE maintenance", &ctx) {
            Answer::Error(m) => assert!(m.contains("no server"), "{m}"),
            _ => panic!("expected an error"),
        }
        match execute("SET BACKEND '10.0.0.9:3306' STATE sleepy", &ctx) {
            Answer::Error(m) => assert!(m.contains("online, maintenance or offline"), "{m}"),
            _ => panic!("expected an error"),
        }
        match execute("show backends;", &ctx) {
            Answer::Table(t) => assert_eq!(t.columns[0], "group"),
            _ => panic!("expected a table"),
        }
        match execute("explain route   SELECT * FROM t FOR UPDATE", &ctx) {
            Answer::Table(t) => {
                assert_eq!(t.rows[0][2].as_deref(), Some("primary"));
                assert_eq!(t.rows[0][3].as_deref(), Some("locking-read"));
            }
            _ => panic!("expected a table"),
        }
        match execute("EXPLAIN ROUTE FOR USER nobody SELECT 1", &ctx) {
            Answer::Error(m) => assert!(m.contains("nobody")),
            _ => panic!("expected an error"),
        }
    }
}
