//! Routing decisions as golden files: `testdata/*.json`, each a list of
//! cases (a statement, the session's facts, the routing policy and the
//! group's facts) with the plan they must produce. Every rule of
//! docs/routing.md and docs/consistency.md has cases here.
//!
//! After a deliberate change of routing, `UPDATE_GOLDEN=1 cargo test -p
//! sextant-routing --test golden` rewrites the expectations; review the
//! diff before committing it.

mod common;

use serde::{Deserialize, Serialize};
use sextant_config::{RoutingOverride, RoutingPolicy};
use sextant_routing::{
    plan, plan_execute, Command, Cursor, GroupFacts, Plan, Prepared, SessionFacts, Target,
};
use sextant_sql::{classify, Catalogue, ServerKind};

#[derive(Deserialize, Serialize)]
struct Case {
    /// What the case pins down: the rule of docs/routing.md that decides
    /// it (as "rule N (name)"), and the circumstances.
    comment: String,
    sql: String,
    /// "free" (a fresh session), "transaction", "autocommit_off" (the same
    /// to routing), "pinned", "replica_transaction" (a read-only transaction on
    /// a replica), "replica_state" (state that cannot move, on a replica).
    #[serde(default = "free")]
    session: String,
    /// [routing] keys, as in the config file; the rest default.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    policy: serde_json::Value,
    /// "follow_primary", "pipelining".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    group: Vec<String>,
    /// "query" (default), "prepare", "execute" (prepared while the session
    /// was fresh, executed in `session`), "execute_cursor" (the same,
    /// opening a cursor), or "reads:N" (N queries in a row, the plan of the
    /// last: read_primary_percent's share).
    #[serde(default = "query")]
    command: String,
    /// The tables of the group's catalogue, when it lists them (a read of
    /// any other name is of an unknown table); absent: it lists none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tables: Option<Vec<String>>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Deserialize, Serialize, PartialEq, Debug, Clone)]
struct Expect {
    target: String,
    rule: String,
    requirement: String,
    retry: String,
    pipeline: bool,
    restore_insert_id: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refuse: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    hint_ignored: bool,
}

fn free() -> String {
    "free".into()
}
fn query() -> String {
    "query".into()
}

fn facts(s: &str) -> SessionFacts {
    match s {
        "free" => SessionFacts::default(),
        "transaction" | "autocommit_off" => SessionFacts {
            in_transaction: true,
            ..Default::default()
        },
        "pinned" => SessionFacts {
            pinned: true,
            ..Default::default()
        },
        "replica_transaction" => SessionFacts {
            pinned: true,
            in_transaction: true,
            on_replica: true,
        },
        "replica_state" => SessionFacts {
            pinned: true,
            on_replica: true,
            ..Default::default()
        },
        other => panic!("unknown session {other:?}"),
    }
}

fn run(c: &Case) -> Expect {
    let (p, cl_may_write, s) = plan_of(c);
    // The invariant, over every case: nothing that may write runs on a
    // replica, whatever the hints, settings or pins.
    assert!(
        !(cl_may_write && p.target == Target::Replica),
        "{:?}: may write, planned for a replica",
        c.sql
    );
    assert!(
        !(cl_may_write && s.on_replica && p.refuse.is_none()),
        "{:?}: may write, session bound to a replica, not refused",
        c.sql
    );
    expect_of(&p)
}

fn plan_of(c: &Case) -> (Plan, bool, SessionFacts) {
    let o: RoutingOverride = if c.policy.is_null() {
        RoutingOverride::default()
    } else {
        serde_json::from_value(c.policy.clone()).expect("policy keys")
    };
    let policy = RoutingPolicy::default().with(&o);
    let g = GroupFacts {
        follow_primary: c.group.iter().any(|x| x == "follow_primary"),
        pipelining: c.group.iter().any(|x| x == "pipelining"),
    };
    let s = facts(&c.session);
    let catalogue = c.tables.as_ref().map(|t| {
        Catalogue::new(Some(ServerKind::MariaDb), Vec::<String>::new(), Vec::new())
            .with_tables(t.iter().cloned())
    });
    let cl = match &catalogue {
        Some(cat) => cat.classify(c.sql.as_bytes()),
        None => classify(c.sql.as_bytes()),
    };
    let mut cur = Cursor::default();
    let p: Plan = match c.command.as_str() {
        "query" => plan(&cl, s, &policy, g, Command::Query, &mut cur),
        "prepare" => plan(&cl, s, &policy, g, Command::Prepare, &mut cur),
        "execute" => plan_execute(&Prepared::new(&cl, &policy), s, &policy, g, false),
        "execute_cursor" => plan_execute(&Prepared::new(&cl, &policy), s, &policy, g, true),
        n if n.starts_with("reads:") => {
            let n: usize = n[6..].parse().expect("reads:N");
            let mut last = None;
            for _ in 0..n {
                last = Some(plan(&cl, s, &policy, g, Command::Query, &mut cur));
            }
            last.expect("reads:N with N > 0")
        }
        other => panic!("unknown command {other:?}"),
    };
    (p, cl.may_write(), s)
}

fn expect_of(p: &Plan) -> Expect {
    Expect {
        target: match p.target {
            Target::Primary => "primary",
            Target::Replica => "replica",
        }
        .into(),
        rule: p.rule.name().into(),
        requirement: p.requirement().into(),
        retry: p.retry.name().into(),
        pipeline: p.pipeline,
        restore_insert_id: p.restore_insert_id,
        refuse: p.refuse.map(|r| format!("{r:?}")),
        hint_ignored: p.hint_ignored,
    }
}

#[test]
fn golden_routing_plans() {
    let update = common::updating();
    let mut total = 0;
    let mut failures = Vec::new();
    for f in common::json_files("") {
        let mut cases: Vec<Case> = common::read_cases(&f);
        for c in cases.iter_mut() {
            total += 1;
            let got = run(c);
            // A comment that names a rule names the one that decided.
            if !update && c.comment.contains("rule ") {
                assert!(
                    c.comment.contains(&format!("({})", got.rule)),
                    "{:?}: the comment {:?} names another rule than {}",
                    c.sql,
                    c.comment,
                    got.rule
                );
            }
            assert!(!c.comment.trim().is_empty(), "{:?}: no comment", c.sql);
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            let what = format!("{name}: {:?} ({} session, {})", c.sql, c.session, c.command);
            common::check(&mut c.expect, got, what, &mut failures);
        }
        if update {
            common::write_cases(&f, &cases);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cases are the specification: losing a file must not pass.
    assert!(total >= 80, "only {total} golden cases");
    eprintln!("{total} golden routing cases");
}
