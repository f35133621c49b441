//! What statements leave behind on their session, as golden files:
//! `testdata/effects/*.json`, each a list of cases (a statement, the
//! command that ran it, the session it ran in, what its answer reported)
//! with the effects they must produce. The target is the statement's own
//! plan, so the hold on the primary follows routing as a session sees it.
//!
//! After a deliberate change, `UPDATE_GOLDEN=1 cargo test -p
//! sextant-routing --test effects` rewrites the expectations; review the
//! diff before committing it.

mod common;

use serde::{Deserialize, Serialize};
use sextant_config::RoutingPolicy;
use sextant_routing::{
    effects, plan, plan_execute, Answer, Command, Cursor, Effects, GroupFacts, Pins, Prepared, Ran,
    SessionFacts, Statement, Target,
};
use sextant_sql::classify;
use std::path::PathBuf;

#[derive(Deserialize, Serialize)]
struct Case {
    /// What the case pins down.
    comment: String,
    sql: String,
    /// "query", "execute", "execute_cursor", "bulk", "long_data", "fetch",
    /// "stmt_reset".
    ran: String,
    /// "free", "transaction", "pinned".
    #[serde(default = "free")]
    session: String,
    /// What the answer reported; absent: no answer was relayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer: Option<AnswerCase>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Deserialize, Serialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct AnswerCase {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    error: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    in_transaction: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    cursor_open: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    last_row_sent: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    last_insert_id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_insert_id_set: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    insert_id_reported: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    opaque: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    wrote: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    vars_changed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    connection_ending: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Deserialize, Serialize, PartialEq, Debug, Clone)]
struct Expect {
    target: String,
    pin: Vec<String>,
    unpin: Vec<String>,
    hold_primary_reads: bool,
    insert_id: Option<u64>,
    record_write: bool,
    catalogue_stale: bool,
    client_timeouts: bool,
}

fn free() -> String {
    "free".into()
}

fn facts(s: &str) -> SessionFacts {
    match s {
        "free" => SessionFacts::default(),
        "transaction" => SessionFacts {
            in_transaction: true,
            ..Default::default()
        },
        "pinned" => SessionFacts {
            pinned: true,
            ..Default::default()
        },
        other => panic!("unknown session {other:?}"),
    }
}

fn ran(s: &str) -> Ran {
    match s {
        "query" => Ran::Query,
        "execute" => Ran::Execute { cursor: false },
        "execute_cursor" => Ran::Execute { cursor: true },
        "bulk" => Ran::Bulk,
        "long_data" => Ran::LongData,
        "fetch" => Ran::Fetch,
        "stmt_reset" => Ran::StmtReset,
        other => panic!("unknown command {other:?}"),
    }
}

fn answer(a: &AnswerCase) -> Answer {
    Answer {
        error: a.error,
        in_transaction: a.in_transaction,
        cursor_open: a.cursor_open,
        last_row_sent: a.last_row_sent,
        last_insert_id: a.last_insert_id,
        last_insert_id_set: a.last_insert_id_set,
        insert_id_reported: a.insert_id_reported,
        opaque: a.opaque,
        wrote: a.wrote,
        vars_changed: a.vars_changed,
        connection_ending: a.connection_ending,
    }
}

/// The statement, its plan's target, and its effects.
fn effects_of(sql: &str, r: Ran, session: &str, a: Option<&AnswerCase>) -> (Target, Effects) {
    let policy = RoutingPolicy::default();
    let g = GroupFacts::default();
    let c = classify(sql.as_bytes());
    let s = facts(session);
    let (target, st) = match r {
        Ran::Query => (
            plan(&c, s, &policy, g, Command::Query, &mut Cursor::default()).target,
            Statement::of(&c),
        ),
        Ran::Execute { cursor } => {
            let p = Prepared::new(&c, &policy);
            (
                plan_execute(&p, s, &policy, g, cursor).target,
                p.statement(),
            )
        }
        _ => {
            let p = Prepared::new(&c, &policy);
            (plan_execute(&p, s, &policy, g, false).target, p.statement())
        }
    };
    let a = a.map(answer);
    (target, effects(&st, r, target, a.as_ref()))
}

fn names(p: Pins) -> Vec<String> {
    p.names().into_iter().map(String::from).collect()
}

fn expect_of(target: Target, e: &Effects) -> Expect {
    Expect {
        target: match target {
            Target::Primary => "primary",
            Target::Replica => "replica",
        }
        .into(),
        pin: names(e.pin),
        unpin: names(e.unpin),
        hold_primary_reads: e.hold_primary_reads,
        insert_id: e.insert_id,
        record_write: e.record_write,
        catalogue_stale: e.catalogue_stale,
        client_timeouts: e.client_timeouts,
    }
}

fn cases() -> Vec<(PathBuf, Vec<Case>)> {
    common::json_files("effects")
        .into_iter()
        .map(|f| {
            let cases: Vec<Case> = common::read_cases(&f);
            (f, cases)
        })
        .collect()
}

#[test]
fn golden_effects() {
    let update = common::updating();
    let (mut total, mut failures) = (0, Vec::new());
    for (f, mut cases) in cases() {
        for c in cases.iter_mut() {
            total += 1;
            assert!(!c.comment.trim().is_empty(), "{:?}: no comment", c.sql);
            let (target, e) = effects_of(&c.sql, ran(&c.ran), &c.session, c.answer.as_ref());
            assert!(
                (e.pin & e.unpin).is_empty(),
                "{:?}: a pin both begins and ends: {e:?}",
                c.sql
            );
            let got = expect_of(target, &e);
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            let what = format!("{name}: {:?} ({}, {} session)", c.sql, c.ran, c.session);
            common::check(&mut c.expect, got, what, &mut failures);
        }
        if update {
            common::write_cases(&f, &cases);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cases are the specification: losing a file must not pass.
    assert!(total >= 100, "only {total} golden effect cases");
    eprintln!("{total} golden effect cases");
}

/// The same statement has the same effects whether it came as text or as a
/// prepared execution, in every session and with every answer of the
/// golden files; an execution only also consumes the parameters sent
/// ahead of it (long data). A read that took a pipelined connection
/// reports nothing beyond its answer, so it is the case with no tracking.
#[test]
fn text_and_prepared_statements_have_the_same_effects() {
    let mut compared = 0;
    for (_, cases) in cases() {
        for c in cases.iter().filter(|c| c.ran == "query") {
            let mut q = effects_of(&c.sql, Ran::Query, &c.session, c.answer.as_ref());
            q.1.unpin.remove(Pins::LONG_DATA);
            let mut x = effects_of(
                &c.sql,
                Ran::Execute { cursor: false },
                &c.session,
                c.answer.as_ref(),
            );
            assert!(x.1.unpin.contains(Pins::LONG_DATA), "{:?}", c.sql);
            x.1.unpin.remove(Pins::LONG_DATA);
            assert_eq!(
                q, x,
                "{:?} ({} session): text vs prepared",
                c.sql, c.session
            );
            compared += 1;
        }
    }
    assert!(compared >= 40, "only {compared} statements compared");
}
