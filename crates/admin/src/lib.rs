//! Admin commands. Each answers with a table (or an error message); the
//! server binary speaks the protocol around them.

pub mod metrics;

use sextant_backend::Pool;
use sextant_config::RoutingPolicy;
use sextant_routing::{plan, Command, Cursor, Rule, SessionFacts, Target};
use std::sync::atomic::Ordering;

pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

pub enum Answer {
    Table(Table),
    Ok,
    Error(String),
    /// `KILL [QUERY | CONNECTION] id`: for the proxy to carry out.
    Kill {
        id: u32,
        query_only: bool,
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
    /// `XA COMMIT | ROLLBACK 'gtrid'`: for the proxy to resolve one
    /// distributed transaction's prepared branches by hand.
    XaResolve {
        gtrid: String,
        commit: bool,
    },
    /// `RELOAD CONFIG`: for the proxy to read its config file again.
    Reload,
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
    /// Heap allocations since start, when counting is on
    /// (SEXTANT_COUNT_ALLOCATIONS=1).
    pub allocations: Option<&'static std::sync::atomic::AtomicU64>,
}

pub const COMMANDS: &str =
    "SHOW BACKENDS, SHOW STATUS, SHOW STATS, SHOW SESSIONS, KILL [QUERY] <session id>, \
     EXPLAIN ROUTE [FOR USER name] [IN DATABASE db] <statement>, SHOW SHARD SCHEMA DIFF db.table, \
     SHOW XA, XA COMMIT '<gtrid>', XA ROLLBACK '<gtrid>', RELOAD CONFIG, SELECT 1";

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
    /// Each user's sessions open now.
    pub user_sessions: Vec<(&'a str, usize)>,
}

pub fn execute(sql: &str, ctx: &Context<'_>) -> Answer {
    let (pool, counters) = (ctx.pool, ctx.counters);
    if let Some(rest) = strip_words(sql, &["EXPLAIN", "ROUTE"]) {
        return explain_route(rest, ctx);
    }
    if let Some(rest) = strip_words(sql, &["SHOW", "SHARD", "SCHEMA", "DIFF"]) {
        return shard_schema(rest, ctx);
    }
    for (verb, commit) in [("COMMIT", true), ("ROLLBACK", false)] {
        if let Some(rest) = strip_words(sql, &["XA", verb]) {
            let gtrid = rest.trim().trim_end_matches(';').trim();
            let quoted = gtrid.len() >= 2
                && (gtrid.starts_with('\'') && gtrid.ends_with('\'')
                    || gtrid.starts_with('"') && gtrid.ends_with('"'));
            if !quoted {
                return Answer::Error(format!(
                    "XA {verb} '<gtrid>': the transaction's gtrid in quotes, as SHOW XA lists it"
                ));
            }
            return Answer::XaResolve {
                gtrid: gtrid[1..gtrid.len() - 1].to_string(),
                commit,
            };
        }
    }
    for (words, on) in [
        (["SET", "MAINTENANCE", "ON"], true),
        (["SET", "MAINTENANCE", "OFF"], false),
    ] {
        if let Some(rest) = strip_words(sql, &words) {
            let addr = rest
                .trim()
                .trim_end_matches(';')
                .trim()
                .trim_matches(|c| c == '\'' || c == '"');
            let mut found = false;
            for s in pool.servers().filter(|s| &*s.addr == addr) {
                s.health.set_maintenance(on);
                found = true;
            }
            return if found {
                Answer::Ok
            } else {
                Answer::Error(format!("no server {addr:?}; SHOW BACKENDS lists them"))
            };
        }
    }
    let words: Vec<String> = sql
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let w: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
    match w.as_slice() {
        ["SHOW", "BACKENDS"] | ["SHOW", "SERVERS"] => Answer::Table(backends(pool)),
        ["SHOW", "SESSIONS"] | ["SHOW", "PROCESSLIST"] => Answer::Table(sessions(ctx)),
        ["KILL", rest @ ..] => kill(rest),
        ["SHOW", "STATUS"] => Answer::Table(status(counters)),
        ["SHOW", "STATS"] => Answer::Table(metrics::table(&metrics::collect(ctx))),
        ["SHOW", "XA"] => Answer::ShowXa,
        ["RELOAD", "CONFIG"] => Answer::Reload,
        ["SELECT", "1"] => Answer::Table(Table {
            columns: vec!["1".into()],
            rows: vec![vec![Some("1".into())]],
        }),
        // Client libraries send these on connect; answering keeps them happy.
        ["SET", ..] => Answer::Ok,
        ["SELECT", rest @ ..] if !rest.is_empty() && rest.iter().all(|w| w.starts_with("@@")) => {
            Answer::Table(system_variables(sql))
        }
        [] => Answer::Error("empty command".into()),
        _ => Answer::Error(format!(
            "unknown admin command {sql:?}; the admin port understands: {COMMANDS}"
        )),
    }
}

fn sessions(ctx: &Context<'_>) -> Table {
    let rows = (ctx.sessions)()
        .into_iter()
        .map(|s| {
            let (state, server, thread) = match s.running {
                Some((server, thread)) => ("running", Some(server), Some(thread.to_string())),
                None => ("idle", None, None),
            };
            vec![
                Some(s.id.to_string()),
                Some(s.user),
                Some(s.client),
                Some(s.group),
                Some(state.to_string()),
                server,
                thread,
            ]
        })
        .collect();
    Table {
        columns: [
            "id",
            "user",
            "client",
            "group",
            "state",
            "server",
            "server_thread",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

/// `KILL [QUERY | CONNECTION] <session id>` (the words after KILL).
fn kill(words: &[&str]) -> Answer {
    let (query_only, id) = match words {
        ["QUERY", id] => (true, id),
        ["CONNECTION", id] | [id] => (false, id),
        _ => return Answer::Error("KILL [QUERY | CONNECTION] <session id>".into()),
    };
    match id.parse() {
        Ok(id) => Answer::Kill { id, query_only },
        Err(_) => Answer::Error(format!(
            "{id:?} is not a session id (SHOW SESSIONS lists them)"
        )),
    }
}

/// `text` without its leading `words` (case-insensitive, any spacing).
fn strip_words<'s>(text: &'s str, words: &[&str]) -> Option<&'s str> {
    let mut rest = text.trim_start();
    for w in words {
        let head = rest.get(..w.len())?;
        if !head.eq_ignore_ascii_case(w) {
            return None;
        }
        rest = &rest[w.len()..];
        if !rest.starts_with(char::is_whitespace) && !rest.is_empty() {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(rest)
}

/// EXPLAIN ROUTE [FOR USER name] <statement>: the plan a fresh session of
/// that user (default: the first configured user) would execute for the
/// statement, made by the same function sessions use.
fn explain_route(rest: &str, ctx: &Context<'_>) -> Answer {
    let (user, stmt) = match strip_words(rest, &["FOR", "USER"]) {
        Some(r) => {
            let r = r.trim_start();
            let end = r.find(char::is_whitespace).unwrap_or(r.len());
            let name = r[..end].trim_matches(|c| c == '\'' || c == '"' || c == '`');
            (Some(name), r[end..].trim())
        }
        None => (None, rest.trim()),
    };
    // IN DATABASE db: the session's current database (sharding: where
    // unqualified tables are).
    let (db, stmt) = match strip_words(stmt, &["IN", "DATABASE"]) {
        Some(r) => {
            let r = r.trim_start();
            let end = r.find(char::is_whitespace).unwrap_or(r.len());
            (Some(r[..end].trim_matches('`')), r[end..].trim())
        }
        None => (None, stmt),
    };
    let stmt = stmt.trim_end_matches(';').trim();
    if stmt.is_empty() {
        return Answer::Error(
            "EXPLAIN ROUTE needs a statement, e.g. EXPLAIN ROUTE SELECT 1".into(),
        );
    }
    let entry = match user {
        Some(u) => match ctx.users.iter().find(|(n, _, _)| *n == u) {
            Some(e) => e,
            None => return Answer::Error(format!("no user {u:?} in the configuration")),
        },
        None => match ctx.users.first() {
            Some(e) => e,
            None => return Answer::Error("no users configured".into()),
        },
    };
    let (name, policy, group) = entry;
    let (group, sharding) = match ctx.sharding {
        Some(r) => shard_route(r, db, stmt, group),
        None => (group.to_string(), String::new()),
    };
    let group = group.as_str();
    let g = ctx
        .pool
        .groups
        .get(group.split(", ").next().unwrap_or(group));
    let c = match g {
        Some(g) => g.classify(stmt.as_bytes()),
        None => sextant_sql::classify(stmt.as_bytes()),
    };
    let d = plan(
        &c,
        SessionFacts::default(),
        policy,
        g.map(|g| g.plan_facts()).unwrap_or_default(),
        Command::Query,
        &mut Cursor::default(),
    );
    let servers = match (d.target, g) {
        (Target::Primary, Some(g)) => g
            .primary()
            .map(|p| p.addr.to_string())
            .unwrap_or_else(|| "(no primary known)".into()),
        (Target::Replica, Some(g)) => {
            let primary = g
                .primary()
                .map(|p| p.addr.to_string())
                .unwrap_or_else(|| "(no primary known)".into());
            let readers: Vec<usize> = (0..g.members.len())
                .filter(|&i| {
                    g.read_weight(i) > 0
                        && (g.members[i].role() == sextant_backend::Role::Replica
                            || g.primary_weight() > 0)
                })
                .collect();
            // What a session would pick from now: servers in rotation
            // (not down, lagging or in maintenance).
            let (usable, out): (Vec<usize>, Vec<usize>) = readers
                .iter()
                .partition(|&&i| g.members[i].load().is_some());
            let mut v: Vec<String> = usable
                .iter()
                .map(|&i| g.members[i].addr.to_string())
                .collect();
            if readers.is_empty() {
                v.push(format!("{primary} (no replica configured)"));
            } else if usable.is_empty() {
                v.push(format!("{primary} (no replica in rotation)"));
            } else if g.primary_weight() == 0 {
                v.push(format!("else {primary}"));
            }
            if !out.is_empty() {
                let out: Vec<String> = out
                    .iter()
                    .map(|&i| {
                        let m = &g.members[i];
                        format!("{} {}", m.addr, m.health.state_name())
                    })
                    .collect();
                v.push(format!("(out of rotation: {})", out.join(", ")));
            }
            v.join(", ")
        }
        (_, None) => String::new(),
    };
    let mut note = String::new();
    if d.hint_ignored {
        note = "the READONLY hint does not apply: the statement may write, lock, or leave state on its connection".into();
    } else if d.rule == Rule::Read && policy.read_primary_percent > 0 {
        note = format!(
            "{}% of such reads go to the primary (read_primary_percent)",
            policy.read_primary_percent
        );
    }
    let target = match d.target {
        Target::Primary => "primary",
        Target::Replica => "replica",
    };
    Answer::Table(Table {
        columns: [
            "user",
            "group",
            "target",
            "rule",
            "servers",
            "statement",
            "read_only",
            "consistency",
            "requires",
            "retry",
            "pipeline",
            "note",
            "sharding",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![vec![
            Some(name.to_string()),
            Some(group.to_string()),
            Some(target.into()),
            Some(d.rule.name().into()),
            Some(servers),
            Some(format!("{:?}", c.kind)),
            Some(c.read_only.to_string()),
            Some(consistency_name(d.consistency).into()),
            Some(d.requirement().into()),
            Some(d.retry.name().into()),
            Some(d.pipeline.to_string()),
            Some(note),
            Some(sharding),
        ]],
    })
}

/// Where the sharding router sends a statement: the group(s) (the first
/// is the one the plan columns describe) and the sharded plan in words.
fn shard_route(
    r: &sextant_sharding::Router,
    db: Option<&str>,
    stmt: &str,
    user_group: &str,
) -> (String, String) {
    use sextant_sharding::Route;
    let c = sextant_sql::classify(stmt.as_bytes());
    let route = r.route(db, stmt.as_bytes(), sextant_sql::LexMode::DEFAULT, &[], &c);
    let names = |set: sextant_sharding::analyze::GroupSet| {
        set.iter()
            .map(|i| r.group_name(i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match route {
        Route::Session => {
            let g = db
                .and_then(|d| r.layout.default_group.get(&d.to_ascii_lowercase()))
                .map_or(user_group.to_string(), String::clone);
            (
                g.clone(),
                format!("names no table of the layout: runs in {g}, the session's group"),
            )
        }
        Route::AnyOf(set) => (
            names(set),
            format!(
                "any one group of {} (each holds a copy of what it reads): the group of the session's transaction, else taking turns; the statement unchanged",
                names(set)
            ),
        ),
        Route::One(i) => (
            r.group_name(i).to_string(),
            format!("one group: {}, the statement unchanged", r.group_name(i)),
        ),
        Route::Scatter(set) => (
            names(set),
            format!(
                "read over {} groups ({}): the statement unchanged on each, at once; rows concatenated in group order, one end",
                set.len(),
                names(set)
            ),
        ),
        Route::Broadcast(set) => (
            names(set),
            format!(
                "on each group's primary in turn ({}): the statement unchanged; stops at the first failure and names the groups reached",
                names(set)
            ),
        ),
        Route::Merge(m) => (
            names(m.groups),
            format!(
                "read over {} groups ({}), each running: {}; {}",
                m.groups.len(),
                names(m.groups),
                String::from_utf8_lossy(&m.sql),
                match &m.grouped {
                    Some(g) => g.describe(),
                    None => format!(
                        "rows merged{}{}, one held per group at a time",
                        match m.order.len() {
                            0 => String::new(),
                            n => format!(" by {n} ORDER BY item(s) (hidden columns cut off)"),
                        },
                        match m.count {
                            Some(c) => format!(", {} skipped, then at most {c}", m.offset),
                            None => String::new(),
                        }
                    ),
                }
            ),
        ),
        Route::Write(w) => (
            names(w.groups),
            match (w.split.is_empty(), w.copies) {
                (true, true) => format!(
                    "write to every copy ({}) on each group's primary, as one distributed transaction (two-phase commit); one copy's affected rows",
                    names(w.groups)
                ),
                (true, false) => format!(
                    "write to {} groups ({}) on each group's primary, the statement unchanged, as one distributed transaction (two-phase commit); affected rows added",
                    w.groups.len(),
                    names(w.groups)
                ),
                (false, _) => format!(
                    "rows split by group, as one distributed transaction (two-phase commit): {}",
                    w.split
                        .iter()
                        .map(|(g, q)| format!("{} runs: {}", r.group_name(*g), String::from_utf8_lossy(q)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            },
        ),
        Route::Refuse(why) => (user_group.to_string(), format!("refused with 1235: {why}")),
    }
}

/// SHOW SHARD SCHEMA DIFF db.table: the groups that hold the table.
fn shard_schema(rest: &str, ctx: &Context<'_>) -> Answer {
    use sextant_sharding::Placement;
    let Some(r) = ctx.sharding else {
        return Answer::Error(
            "SHOW SHARD SCHEMA DIFF: the configuration has no [sharding] layout".into(),
        );
    };
    let name = rest.trim().trim_end_matches(';').trim().replace('`', "");
    let Some((db, table)) = name.split_once('.') else {
        return Answer::Error("SHOW SHARD SCHEMA DIFF needs a table as db.table".into());
    };
    let groups: Vec<String> = match r.layout.placement(db, table) {
        Placement::Sharded { vdb, .. } => vdb.groups().iter().map(|g| g.to_string()).collect(),
        Placement::Global { groups } => groups.to_vec(),
        Placement::Single { group } | Placement::Default { group } => vec![group.to_string()],
        Placement::Unknown => {
            return Answer::Error(format!(
                "{db}.{table}: the sharding layout does not place it"
            ))
        }
    };
    Answer::ShardSchema {
        db: db.to_string(),
        table: table.to_string(),
        groups,
    }
}

/// Compares a table's definitions (`SHOW CREATE TABLE`, or the error a
/// group answered) across its groups: one row per group, saying whether
/// it matches the definition most groups have. AUTO_INCREMENT counters
/// differ between groups by nature and are left out.
pub fn schema_diff(defs: &[(String, Result<String, String>)]) -> Table {
    let norm = |d: &str| {
        d.split_whitespace()
            .filter(|w| !w.to_ascii_uppercase().starts_with("AUTO_INCREMENT="))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let normalized: Vec<Option<String>> = defs
        .iter()
        .map(|(_, d)| d.as_ref().ok().map(|d| norm(d)))
        .collect();
    // The definition most groups have.
    let mut common: Option<&String> = None;
    let mut best = 0;
    for d in normalized.iter().flatten() {
        let n = normalized.iter().flatten().filter(|x| *x == d).count();
        if n > best {
            best = n;
            common = Some(d);
        }
    }
    let rows = defs
        .iter()
        .zip(&normalized)
        .map(|((group, d), n)| {
            let status = match (d, n) {
                (Err(e), _) => format!("missing: {e}"),
                (Ok(_), Some(n)) if Some(n) == common => "same".to_string(),
                _ => "differs".to_string(),
            };
            vec![
                Some(group.clone()),
                Some(status),
                Some(d.clone().unwrap_or_default()),
            ]
        })
        .collect();
    Table {
        columns: ["group", "status", "definition"].map(String::from).to_vec(),
        rows,
    }
}

fn consistency_name(c: sextant_config::Consistency) -> &'static str {
    use sextant_config::Consistency::*;
    match c {
        Eventual => "eventual",
        ReadYourWrites => "read_your_writes",
        Monotonic => "monotonic",
        Strong => "strong",
    }
}

/// `SELECT @@a, @@b`: what a client library asks on connect.
fn system_variables(sql: &str) -> Table {
    let names: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| w.starts_with("@@"))
        .collect();
    let mut columns = Vec::new();
    let mut row = Vec::new();
    for n in names {
        let var = n
            .trim_start_matches('@')
            .rsplit('.')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let value = match var.as_str() {
            "max_allowed_packet" => Some("16777216".to_string()),
            "wait_timeout" | "interactive_timeout" => Some("28800".into()),
            "version_comment" => Some("sextant admin".into()),
            "version" => Some(concat!("8.0.0-sextant-admin-", env!("CARGO_PKG_VERSION")).into()),
            "autocommit" => Some("1".into()),
            _ => None,
        };
        columns.push(n.to_string());
        row.push(value);
    }
    Table {
        columns,
        rows: vec![row],
    }
}

fn backends(pool: &Pool) -> Table {
    let mut rows = Vec::new();
    for s in pool.servers() {
        let st = s.stats();
        rows.push(vec![
            Some(s.group.to_string()),
            Some(s.role().to_string()),
            Some(s.addr.to_string()),
            Some(s.weight().to_string()),
            Some(s.health.state_name().into()),
            Some(st.open.to_string()),
            Some(st.idle.to_string()),
            Some((st.open - st.idle.min(st.open)).to_string()),
            Some(st.waiters.to_string()),
            Some(st.borrows.to_string()),
            Some(st.connects.to_string()),
            Some(st.connect_failures.to_string()),
            Some(st.pipes.to_string()),
            Some(st.pipelined.to_string()),
            Some(st.pipe_sends.to_string()),
            s.health.version(),
            Some(s.health.lag_ms().to_string()),
            s.health.last_error(),
            s.health.member_state(),
            Some(s.health.stats.per_second().to_string()),
            Some(s.health.stats.read().statements.to_string()),
            Some(s.health.outstanding().to_string()),
            Some(s.health.stats.read().errors.to_string()),
            Some(s.health.applied_list()).filter(|a| !a.is_empty()),
        ]);
    }
    Table {
        columns: [
            "group",
            "role",
            "address",
            "weight",
            "state",
            "conn_open",
            "conn_idle",
            "conn_used",
            "waiters",
            "borrows",
            "connects",
            "connect_errors",
            "pipes",
            "pipelined",
            "pipe_sends",
            "version",
            "lag_ms",
            "last_error",
            "member_state",
            "statements_per_s",
            "statements",
            "in_flight",
            "errors",
            "applied_gtid",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}

fn status(c: &Counters) -> Table {
    let v = |n: &str, x: u64| vec![Some(n.to_string()), Some(x.to_string())];
    Table {
        columns: vec!["variable".into(), "value".into()],
        rows: vec![
            v(
                "client_connections",
                c.client_connections.load(Ordering::Relaxed) as u64,
            ),
            v(
                "client_connections_total",
                c.client_connections_total.load(Ordering::Relaxed),
            ),
            v("queries", c.queries.load(Ordering::Relaxed)),
            v("client_errors", c.client_errors.load(Ordering::Relaxed)),
            v(
                "xa_one_phase_commits",
                c.xa_one_phase.load(Ordering::Relaxed),
            ),
            v(
                "xa_two_phase_commits",
                c.xa_two_phase.load(Ordering::Relaxed),
            ),
            v("xa_rollbacks", c.xa_rolled_back.load(Ordering::Relaxed)),
            v(
                "xa_recovered_branches",
                c.xa_recovered_branches.load(Ordering::Relaxed),
            ),
        ]
        .into_iter()
        .chain(
            c.allocations
                .map(|a| v("allocations", a.load(Ordering::Relaxed))),
        )
        .collect(),
    }
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
        let ctx = Context {
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
            user_sessions: vec![("app", 1)],
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
        assert!(matches!(
            execute("KILL QUERY 7", &ctx),
            Answer::Kill {
                id: 7,
                query_only: true
            }
        ));
        assert!(matches!(
            execute("kill 8;", &ctx),
            Answer::Kill {
                id: 8,
                query_only: false
            }
        ));
        assert!(matches!(execute("KILL USER app", &ctx), Answer::Error(_)));
        match execute("DROP EVERYTHING", &ctx) {
            Answer::Error(m) => assert!(m.contains("SHOW BACKENDS"), "{m}"),
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
