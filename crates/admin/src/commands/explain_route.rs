//! `EXPLAIN ROUTE [FOR USER name] [IN DATABASE db] <statement>`: where a
//! statement would go, decided by the function sessions use.

use super::{strip_words, AdminCommand, Query};
use crate::{Answer, Context, Table};
use sextant_routing::{plan, Command, Cursor, Rule, SessionFacts, Target};

pub struct ExplainRoute;

impl AdminCommand for ExplainRoute {
    fn syntax(&self) -> &'static str {
        "EXPLAIN ROUTE [FOR USER u] [IN DATABASE d] <statement>"
    }
    fn help(&self) -> &'static str {
        "where a statement would go and which rule decides it (with a sharded layout: which groups)"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.after(&["EXPLAIN", "ROUTE"])
            .map(|rest| explain_route(rest, ctx))
    }
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
    let mut c = match g {
        Some(g) => g.classify(stmt.as_bytes()),
        None => sextant_sql::classify(stmt.as_bytes()),
    };
    // A session asks the primary about such names before placing the
    // read; the plan shown is the one for tables (the note says so).
    let unknown = c.flags.contains(sextant_sql::Flags::UNKNOWN_TABLE);
    c.flags.remove(sextant_sql::Flags::UNKNOWN_TABLE);
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
    if unknown {
        if !note.is_empty() {
            note.push_str("; ");
        }
        note.push_str("names a table the catalogue did not list when last read: a session first asks the primary what it is, and reads a view whose definition may write on the primary");
    }
    let target = match d.target {
        Target::Primary => "primary",
        Target::Replica => "replica",
    };
    let galera = g.is_some_and(|g| g.topology == sextant_config::Topology::Galera);
    let wait = match (d.target, d.read.own_writes) {
        (Target::Replica, Some(_)) if galera => {
            "after a write no node is known to have: the primary, until one has it".to_string()
        }
        (Target::Replica, Some(_)) if policy.causal_wait_ms > 0 => format!(
            "after a write no replica is known to have: waits up to {} ms on a replica (sent with the read), else the primary",
            policy.causal_wait_ms
        ),
        (Target::Replica, Some(_)) => {
            "after a write no replica is known to have: the primary (causal_wait_ms = 0)".into()
        }
        _ => String::new(),
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
            "wait",
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
            Some(wait),
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

fn consistency_name(c: sextant_config::Consistency) -> &'static str {
    use sextant_config::Consistency::*;
    match c {
        Eventual => "eventual",
        ReadYourWrites => "read_your_writes",
        Monotonic => "monotonic",
        Strong => "strong",
    }
}
