//! Sextant's metrics, read once from the counters and servers, for two
//! readers: `/metrics` (Prometheus text exposition) and the admin port's
//! `SHOW STATS` (a table). Every figure is an atomic sextant already keeps
//! (per server: statements, errors, response times, pool; per process:
//! connections, statements, distributed transactions), so nothing on the
//! statement path looks anything up; this module only reads and formats.
//!
//! The exposition format is written here rather than through a metrics
//! registry crate: those keep their own per-label storage, which the
//! statement path would have to update through a map, and the format
//! itself is a few lines (tests parse it with Prometheus's own parser).

use crate::Context;
use sextant_backend::stats::LATENCY_BUCKETS_US;
use std::fmt::Write;
use std::sync::atomic::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One sample: the family's name plus `suffix` (`_bucket`, `_sum`,
/// `_count` for histograms), its labels and value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

#[derive(Debug, Clone)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

impl Family {
    fn new(name: &'static str, kind: Kind, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    /// A family of one unlabelled sample.
    fn single(name: &'static str, kind: Kind, help: &'static str, value: f64) -> Family {
        let mut f = Family::new(name, kind, help);
        f.push(vec![], value);
        f
    }

    fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push(Sample {
            suffix: "",
            labels,
            value,
        });
    }
}

/// Every metric now.
pub fn collect(ctx: &Context<'_>) -> Vec<Family> {
    use Kind::*;
    let c = ctx.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    let mut out = vec![
        Family::single(
            "sextant_client_connections",
            Gauge,
            "Client sessions open now.",
            c.client_connections.load(Ordering::Relaxed) as f64,
        ),
        Family::single(
            "sextant_client_connections_total",
            Counter,
            "Client connections accepted since start.",
            load(&c.client_connections_total),
        ),
        Family::single(
            "sextant_client_statements_total",
            Counter,
            "Commands clients sent since start.",
            load(&c.queries),
        ),
        Family::single(
            "sextant_client_errors_total",
            Counter,
            "Sessions ended by an error of sextant's (not a server's).",
            load(&c.client_errors),
        ),
    ];
    let mut xa = Family::new(
        "sextant_xa_commits_total",
        Counter,
        "Distributed transactions committed, by one-phase or two-phase commit.",
    );
    xa.push(vec![("phases", "one".into())], load(&c.xa_one_phase));
    xa.push(vec![("phases", "two".into())], load(&c.xa_two_phase));
    out.push(xa);
    out.push(Family::single(
        "sextant_xa_rollbacks_total",
        Counter,
        "Distributed transactions rolled back.",
        load(&c.xa_rolled_back),
    ));
    out.push(Family::single(
        "sextant_xa_recovered_branches_total",
        Counter,
        "Prepared branches recovery resolved.",
        load(&c.xa_recovered_branches),
    ));
    let mut replays = Family::new(
        "sextant_transaction_replays_total",
        Counter,
        "Transactions whose server connection was lost, run again on a new one, by outcome (replayed, mismatch, refused, failed).",
    );
    for (outcome, n) in [
        ("replayed", &c.replays_done),
        ("mismatch", &c.replays_mismatched),
        ("refused", &c.replays_refused),
        ("failed", &c.replays_failed),
    ] {
        replays.push(vec![("outcome", outcome.into())], load(n));
    }
    out.push(replays);
    let mut refused = Family::new(
        "sextant_transaction_replays_refused_total",
        Counter,
        "Transactions not replayed for what they held, by reason.",
    );
    for (reason, n) in crate::REPLAY_REFUSALS.iter().zip(&c.replays_refused_by) {
        refused.push(vec![("reason", reason.to_string())], load(n));
    }
    out.push(refused);

    let t = crate::traffic::totals();
    let mut kinds = Family::new(
        "sextant_statements_total",
        Counter,
        "Client statements by kind (read, write, transaction, ddl, session, admin, other).",
    );
    for (k, n) in crate::traffic::KINDS.iter().zip(t.kinds) {
        kinds.push(vec![("kind", k.to_string())], n as f64);
    }
    out.push(kinds);
    let mut rules = Family::new(
        "sextant_routing_decisions_total",
        Counter,
        "Client statements by the routing rule that placed them (EXPLAIN ROUTE names the rules).",
    );
    for (r, n) in sextant_routing::Rule::ALL.iter().zip(t.rules) {
        rules.push(vec![("rule", r.name().to_string())], n as f64);
    }
    out.push(rules);
    let mut errs = Family::new(
        "sextant_errors_total",
        Counter,
        "Errors sextant itself answered clients with, by MySQL error code (servers' errors: sextant_server_errors_total).",
    );
    for (code, n) in crate::traffic::ERROR_CODES.iter().zip(t.errors) {
        if n > 0 {
            errs.push(vec![("code", code.to_string())], n as f64);
        }
    }
    if let Some(&n) = t.errors.last().filter(|n| **n > 0) {
        errs.push(vec![("code", "other".into())], n as f64);
    }
    out.push(errs);
    let mut bytes = Family::new(
        "sextant_client_bytes_total",
        Counter,
        "Bytes received from and sent to clients (as on the wire, compressed or not).",
    );
    bytes.push(vec![("direction", "received".into())], t.bytes_in as f64);
    bytes.push(vec![("direction", "sent".into())], t.bytes_out as f64);
    out.push(bytes);

    let mut users = Family::new(
        "sextant_user_connections",
        Gauge,
        "Client sessions open now, by user.",
    );
    let mut user_statements = Family::new(
        "sextant_user_statements_total",
        Counter,
        "Commands the user's sessions sent.",
    );
    for (name, n, statements) in &ctx.user_sessions {
        users.push(vec![("user", name.to_string())], *n as f64);
        user_statements.push(vec![("user", name.to_string())], *statements as f64);
    }
    out.push(users);
    out.push(user_statements);

    let mut up = Family::new(
        "sextant_server_up",
        Gauge,
        "1 when the server takes statements (reachable, not in maintenance, not lagging).",
    );
    let mut statements = Family::new(
        "sextant_server_statements_total",
        Counter,
        "Client statements relayed to the server.",
    );
    let mut errors = Family::new(
        "sextant_server_errors_total",
        Counter,
        "Client statements the server answered with an error.",
    );
    let mut latency = Family::new(
        "sextant_server_statement_duration_seconds",
        Histogram,
        "Time from sending a client's statement to the end of the server's answer.",
    );
    let mut in_flight = Family::new(
        "sextant_server_statements_in_flight",
        Gauge,
        "Client statements the server is running now.",
    );
    let mut lag = Family::new(
        "sextant_server_replication_lag_seconds",
        Gauge,
        "Replication lag as the monitor last measured it (replicas only).",
    );
    let mut conns = Family::new(
        "sextant_pool_connections",
        Gauge,
        "Server connections sextant holds, by state (in use or idle).",
    );
    let mut waiters = Family::new(
        "sextant_pool_waiters",
        Gauge,
        "Sessions waiting for a connection of a full pool.",
    );
    let mut borrows = Family::new(
        "sextant_pool_borrows_total",
        Counter,
        "Connections lent to sessions from the pool.",
    );
    let mut connects = Family::new(
        "sextant_pool_connects_total",
        Counter,
        "Server connections opened.",
    );
    let mut connect_failures = Family::new(
        "sextant_pool_connect_failures_total",
        Counter,
        "Server connections that could not be opened.",
    );
    let mut pipelined = Family::new(
        "sextant_pipelined_reads_total",
        Counter,
        "Reads that shared a pipelined connection.",
    );
    let mut waits = Family::new(
        "sextant_causal_waits_total",
        Counter,
        "Reads that waited on this replica for a write they must see (read_your_writes).",
    );
    let mut wait_timeouts = Family::new(
        "sextant_causal_wait_timeouts_total",
        Counter,
        "Waits on this replica that ran out of causal_wait_ms; the read went to the primary.",
    );
    let mut wait_time = Family::new(
        "sextant_causal_wait_seconds_total",
        Counter,
        "Time reads spent waiting on this replica for a write.",
    );
    let mut followed = Family::new(
        "sextant_causal_followed_waits_total",
        Counter,
        "Reads that waited for another read's wait on this replica instead of sending their own.",
    );
    let mut follow_time = Family::new(
        "sextant_causal_followed_wait_seconds_total",
        Counter,
        "Time reads spent waiting for another read's wait on this replica.",
    );
    let mut primary_reads = Family::new(
        "sextant_causal_primary_reads_total",
        Counter,
        "Reads sent to this primary because no replica was known to have (or could wait for in time) a write they must see.",
    );
    for s in ctx.pool.servers() {
        let labels = vec![
            ("group", s.group.to_string()),
            ("server", s.addr.to_string()),
            ("role", s.role().to_string()),
        ];
        let l = || labels.clone();
        let with = |k: &'static str, v: &str| {
            let mut x = labels.clone();
            x.push((k, v.to_string()));
            x
        };
        up.push(l(), if s.health.usable() { 1.0 } else { 0.0 });
        let st = s.health.stats.read();
        statements.push(l(), st.statements as f64);
        errors.push(l(), st.errors as f64);
        for (i, n) in st.cumulative.iter().enumerate() {
            let le = match LATENCY_BUCKETS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".into(),
            };
            latency.samples.push(Sample {
                suffix: "_bucket",
                labels: with("le", &le),
                value: *n as f64,
            });
        }
        latency.samples.push(Sample {
            suffix: "_sum",
            labels: l(),
            value: st.sum_us as f64 / 1e6,
        });
        latency.samples.push(Sample {
            suffix: "_count",
            labels: l(),
            value: *st.cumulative.last().unwrap_or(&0) as f64,
        });
        in_flight.push(l(), s.health.outstanding() as f64);
        let lag_ms = s.health.lag_ms();
        if lag_ms >= 0 {
            lag.push(l(), lag_ms as f64 / 1000.0);
        }
        let p = s.stats();
        let idle = p.idle.min(p.open);
        conns.push(with("state", "in_use"), (p.open - idle) as f64);
        conns.push(with("state", "idle"), idle as f64);
        waiters.push(l(), p.waiters as f64);
        borrows.push(l(), p.borrows as f64);
        connects.push(l(), p.connects as f64);
        connect_failures.push(l(), p.connect_failures as f64);
        pipelined.push(l(), p.pipelined as f64);
        let c = s.health.causal.read();
        match s.role() {
            sextant_backend::Role::Replica => {
                waits.push(l(), c.waits as f64);
                wait_timeouts.push(l(), c.timeouts as f64);
                wait_time.push(l(), c.wait_us as f64 / 1e6);
                followed.push(l(), c.followed as f64);
                follow_time.push(l(), c.follow_us as f64 / 1e6);
            }
            sextant_backend::Role::Primary => primary_reads.push(l(), c.primary_reads as f64),
        }
    }
    out.extend([
        up,
        statements,
        errors,
        latency,
        in_flight,
        lag,
        conns,
        waiters,
        borrows,
        connects,
        connect_failures,
        pipelined,
        waits,
        wait_timeouts,
        wait_time,
        followed,
        follow_time,
        primary_reads,
    ]);
    out.extend(groups(ctx));
    out
}

/// Per group: whether it has a primary, and its failovers.
fn groups(ctx: &Context<'_>) -> Vec<Family> {
    use Kind::*;
    let mut has_primary = Family::new(
        "sextant_group_has_primary",
        Gauge,
        "1 while sextant knows the group's primary (writes can run), 0 while none is known.",
    );
    let mut term = Family::new(
        "sextant_group_failover_term",
        Gauge,
        "The term of the group's primary: one higher at each failover sextant performs.",
    );
    let mut failovers = Family::new(
        "sextant_group_failovers_total",
        Counter,
        "Failovers this instance performed for the group.",
    );
    let mut refusals = Family::new(
        "sextant_group_failover_refusals_total",
        Counter,
        "Failovers refused because no replica could be promoted without losing or diverging.",
    );
    for g in ctx.pool.groups.values() {
        let l = || vec![("group", g.name.to_string())];
        has_primary.push(l(), g.primary().is_some() as u8 as f64);
        term.push(l(), g.ha.term() as f64);
        failovers.push(l(), g.ha.failovers() as f64);
        refusals.push(l(), g.ha.refusals() as f64);
    }
    vec![has_primary, term, failovers, refusals]
}

/// The Prometheus text exposition format (version 0.0.4).
pub fn exposition(families: &[Family]) -> String {
    let mut out = String::with_capacity(8192);
    for f in families {
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# HELP {} {}", f.name, escape(f.help, false));
        let _ = writeln!(out, "# TYPE {} {kind}", f.name);
        for s in &f.samples {
            out.push_str(f.name);
            out.push_str(s.suffix);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape(v, true));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {}", number(s.value));
        }
    }
    out
}

/// `SHOW STATS`: one row per sample (histograms by their count and sum).
pub fn table(families: &[Family]) -> crate::Table {
    let mut rows = Vec::new();
    for f in families {
        for s in f.samples.iter().filter(|s| s.suffix != "_bucket") {
            let labels = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            rows.push(vec![
                Some(format!("{}{}", f.name, s.suffix)),
                Some(labels),
                Some(number(s.value)),
            ]);
        }
    }
    crate::Table {
        columns: vec!["metric".into(), "labels".into(), "value".into()],
        rows,
    }
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Label values escape backslash, quote and newline; help text backslash
/// and newline.
fn escape(s: &str, quote: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '"' if quote => o.push_str("\\\""),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_escapes_and_formats() {
        let mut f = Family::new("x_total", Kind::Counter, "Help with \\ and\nnewline.");
        f.push(vec![("server", "a\"b\\c\nd".into())], 3.0);
        f.push(vec![], 0.25);
        let text = exposition(&[f]);
        assert_eq!(
            text,
            "# HELP x_total Help with \\\\ and\\nnewline.\n# TYPE x_total counter\nx_total{server=\"a\\\"b\\\\c\\nd\"} 3\nx_total 0.25\n"
        );
    }
}
