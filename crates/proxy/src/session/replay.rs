//! Transaction replay: a transaction whose server connection was lost
//! before its COMMIT was sent (the server crashed or was killed, a
//! failover replaced it, the connection was killed or reset) is run
//! again, statement by statement, on a new connection to the group's
//! primary, and goes on there if every statement answers as the client
//! was answered the first time (`crate::checksum`); the client never
//! sees the loss. Otherwise it gets the transaction-lost error, saying
//! why the transaction was not replayed.
//!
//! What is recorded: the text statements of a transaction on the
//! primary, each with its answer's checksum, from the one that opened it
//! (BEGIN, or the first statement with autocommit off). A transaction is
//! never replayed (its record is refused, with the reason kept for the
//! error) when it holds state a new connection would not have or a
//! statement whose effect a second run would not reproduce: see
//! [`refusal`]. A COMMIT (or anything else that may end the
//! transaction) whose answer was lost is never replayed: it may have
//! committed.
//!
//! Memory: each session's record is bounded by `replay_max_bytes`, all
//! sessions' together by `replay_max_total_bytes`; a transaction past
//! either is not replayed. The record's buffers are kept between
//! transactions, so recording allocates nothing per statement once warm.

use super::Session;
use crate::relay::RelayResult;
use sextant_protocol::codec::write_packet;
use sextant_protocol::consts::status;
use sextant_protocol::tracker::Expect;
use sextant_routing::Target;
use sextant_sql::{Classification, Flags, Kind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes all sessions' records hold.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Buffers above this are given back when a transaction ends.
const KEEP_BYTES: usize = 64 * 1024;

/// What the first run of a recorded statement left for the second.
#[derive(Clone)]
struct Entry {
    /// A prepared statement's SQL (its execution's payload is recorded,
    /// with its parameter types, under a statement id set at replay).
    stmt: Option<Arc<[u8]>>,
    /// Where its text ends in the record's buffer.
    end: usize,
    /// Its answer's checksum.
    sum: u64,
    /// The auto-increment value its answer reported (0: none).
    insert_id: u64,
    /// When it was sent (sextant's clock, microseconds since the epoch).
    sent_us: u64,
}

/// Functions whose value is the statement's start time, which the
/// session's `timestamp` pins (SYSDATE() is not among them: the server
/// reads its clock for it whatever `timestamp` says).
const TIME_FUNCTIONS: &[&[u8]] = &[
    b"NOW(",
    b"CURRENT_TIMESTAMP",
    b"CURRENT_DATE",
    b"CURRENT_TIME",
    b"CURDATE(",
    b"CURTIME(",
    b"LOCALTIME",
    b"UNIX_TIMESTAMP(",
    b"UTC_TIMESTAMP",
    b"UTC_DATE",
    b"UTC_TIME",
];

/// Whether a statement's text may read the statement's start time.
fn reads_the_time(stmt: &[u8]) -> bool {
    let upper = stmt.to_ascii_uppercase();
    TIME_FUNCTIONS
        .iter()
        .any(|f| upper.windows(f.len()).any(|w| w == *f))
}

/// Now, in microseconds since the epoch.
impl Session {
    /// When a statement is sent, for its record in the transaction's
    /// replay log (NOW() replays as it ran); 0 where no record can follow:
    /// replay off, or a plain read (`plain_read`: a SELECT of known
    /// tables that cannot write, which cannot open a transaction) with
    /// autocommit on and no transaction open or held back. Reading the
    /// clock cost the autocommit reads ~100 instructions each.
    pub(super) fn sent_at(&self, plain_read: bool) -> u64 {
        let outside = plain_read
            && self.status & (status::AUTOCOMMIT | status::IN_TRANS) == status::AUTOCOMMIT
            && self.pending_begin.is_none()
            && !self.in_transaction();
        match self.trx_log.max == 0 || outside {
            true => 0,
            false => now_us(),
        }
    }
}

pub(super) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One session's record of its open transaction.
#[derive(Default)]
pub(super) struct Log {
    /// The statements' COM_QUERY payloads, one after another.
    buf: Vec<u8>,
    /// Each statement's end in `buf` and what its first run left.
    ends: Vec<Entry>,
    /// A transaction is open (recorded, or refused).
    open: bool,
    /// The connection it is open on (its server, its connection id): a
    /// statement recorded on another belongs to another transaction.
    stamp: Option<(usize, u32)>,
    /// Why it cannot be replayed: the reason's kind (an index into
    /// `sextant_admin::REPLAY_REFUSALS`) and its sentence.
    refused: Option<(usize, String)>,
    /// Bytes counted in HELD.
    held: usize,
    /// `replay_max_bytes` (0: replay off).
    pub(super) max: usize,
    /// `replay_max_total_bytes`.
    pub(super) total_max: usize,
}

impl Log {
    /// Whether answers are to be checksummed: replay is on and the
    /// transaction (if one is open) may still be replayed.
    pub(super) fn wants_checksum(&self) -> bool {
        self.max > 0 && self.refused.is_none()
    }

    fn free(&mut self) {
        if self.held > 0 {
            HELD.fetch_sub(self.held, Ordering::Relaxed);
            self.held = 0;
        }
        self.buf.clear();
        self.ends.clear();
        if self.buf.capacity() > KEEP_BYTES {
            self.buf = Vec::new();
        }
    }

    /// The transaction ended.
    pub(super) fn clear(&mut self) {
        self.free();
        self.open = false;
        self.stamp = None;
        self.refused = None;
    }

    /// Follows the transaction state after a command: whether one is open
    /// (`in_trx`) on the held connection `on`. False: none is, and the
    /// record is cleared; a transaction on another connection than the
    /// record's starts a new record.
    fn follow(&mut self, on: Option<(usize, u32)>, in_trx: bool) -> bool {
        if !in_trx || on.is_none() {
            if self.open {
                self.clear();
            }
            return false;
        }
        if self.stamp != on {
            self.clear();
            self.stamp = on;
        }
        self.open = true;
        true
    }

    /// Whether its transaction is the one open on `conn`.
    pub(super) fn is_on(&self, conn: (usize, u32)) -> bool {
        self.open && self.stamp == Some(conn)
    }
    fn refuse(&mut self, kind: &str, why: String) {
        self.free();
        if self.refused.is_none() {
            let k = sextant_admin::REPLAY_REFUSALS
                .iter()
                .position(|r| *r == kind)
                .unwrap_or(sextant_admin::REPLAY_REFUSALS.len() - 1);
            self.refused = Some((k, why));
        }
    }

    fn push(
        &mut self,
        payload: &[u8],
        stmt: Option<Arc<[u8]>>,
        sum: u64,
        insert_id: u64,
        sent_us: u64,
    ) {
        let n = payload.len() + std::mem::size_of::<Entry>();
        if self.held + n > self.max {
            self.refuse(
                "size",
                format!(
                    "the transaction's statements exceed replay_max_bytes ({} bytes)",
                    self.max
                ),
            );
            return;
        }
        if HELD.fetch_add(n, Ordering::Relaxed) + n > self.total_max {
            HELD.fetch_sub(n, Ordering::Relaxed);
            self.refuse(
                "size",
                format!(
                    "all sessions' replay records are at replay_max_total_bytes ({} bytes)",
                    self.total_max
                ),
            );
            return;
        }
        self.held += n;
        self.buf.extend_from_slice(payload);
        self.ends.push(Entry {
            stmt,
            end: self.buf.len(),
            sum,
            insert_id,
            sent_us,
        });
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.free();
    }
}

/// Why a statement run inside a transaction keeps the transaction from
/// being replayed (None: a second run on a new connection does what the
/// first did, or answers differently and is caught by its checksum).
pub(super) fn refusal(
    kind: Kind,
    f: Flags,
    res: &RelayResult,
) -> Option<(&'static str, &'static str)> {
    const STATE: &str = "connection_state";
    const STMT: &str = "statement";
    const PREPARED: &str = "prepared_statement";
    const SESSION: &str = "session_change";
    let by_flag = [
        (Flags::MULTI, STMT, "several statements in one packet"),
        (Flags::TEMP_TABLE, STATE, "a temporary table"),
        (Flags::NAMED_LOCK, STATE, "a named lock (GET_LOCK)"),
        (Flags::LOCK_TABLES, STATE, "LOCK TABLES"),
        (
            Flags::USER_VAR,
            "user_variable",
            "a user variable (its value may come from before the transaction, or from a function that differs each run)",
        ),
        (Flags::SQL_PREPARE, PREPARED, "SQL PREPARE / EXECUTE"),
        (Flags::HANDLER, STATE, "HANDLER"),
        (Flags::XA, STMT, "XA"),
        (Flags::INTO_FILE, STMT, "SELECT ... INTO OUTFILE"),
        (
            Flags::LAST_INSERT_ID,
            STMT,
            "LAST_INSERT_ID() (it may name an insert of another connection)",
        ),
    ];
    if let Some((_, kind, why)) = by_flag.iter().find(|(flag, _, _)| f.contains(*flag)) {
        return Some((kind, why));
    }
    let by_kind = match kind {
        Kind::Call => Some((
            STMT,
            "CALL (a procedure may commit, or do what a second run would not)",
        )),
        Kind::Load => Some((STMT, "LOAD DATA")),
        Kind::Set | Kind::Use => {
            Some((SESSION, "a session setting changed inside the transaction"))
        }
        Kind::Lock | Kind::Unlock => Some((STATE, "LOCK TABLES")),
        Kind::Handler => Some((STATE, "HANDLER")),
        Kind::Prepare | Kind::Execute | Kind::Deallocate => {
            Some((PREPARED, "SQL PREPARE / EXECUTE"))
        }
        Kind::Xa => Some((STMT, "XA")),
        Kind::Flush | Kind::Kill | Kind::Other => {
            Some((STMT, "a statement sextant does not replay"))
        }
        _ => None,
    };
    if by_kind.is_some() {
        return by_kind;
    }
    if res.vars_changed || res.tracked.opaque {
        return Some((SESSION, "a statement that changed the session's state"));
    }
    None
}

impl Session {
    /// After a text statement that ran on a server: records it while a
    /// transaction is open, or forgets the record once none is.
    pub(super) fn record(
        &mut self,
        c: &Classification<'_>,
        payload: &[u8],
        res: &RelayResult,
        sent_us: u64,
    ) {
        self.record_as(c.kind, c.flags, payload, None, res, sent_us);
    }

    /// [`Session::record`] of a statement of `kind` and `flags`: a text
    /// statement's COM_QUERY, or (`stmt`: its SQL) a prepared
    /// statement's COM_STMT_EXECUTE with its parameter types.
    pub(super) fn record_as(
        &mut self,
        kind: Kind,
        flags: Flags,
        payload: &[u8],
        stmt: Option<Arc<[u8]>>,
        res: &RelayResult,
        sent_us: u64,
    ) {
        if self.trx_log.max == 0 || self.sharding.is_some() {
            return;
        }
        let on = self.held_conn();
        if !self.trx_log.follow(on, res.status & status::IN_TRANS != 0)
            || self.trx_log.refused.is_some()
        {
            return;
        }
        let why = if let Some(why) = refusal(kind, flags, res) {
            Some(why)
        } else if !self.pins.is_empty() {
            Some((
                "connection_state",
                "state held on its connection (user variables, temporary tables, named locks, SQL prepared statements or table locks)",
            ))
        } else if self.ran.2 != crate::digests::Ran::Primary {
            Some(("other", "a transaction on a replica"))
        } else {
            None
        };
        match (why, res.checksum) {
            (Some((kind, why)), _) => self.trx_log.refuse(kind, why.to_string()),
            (None, None) => self
                .trx_log
                .refuse("other", "a statement whose answer was not checked".into()),
            (None, Some(sum)) => self
                .trx_log
                .push(payload, stmt, sum, res.last_insert_id, sent_us),
        }
    }

    /// A BEGIN sextant held back and has now run on the held connection
    /// (deferred.rs): the record of the transaction it opens starts with
    /// it, `sum` its answer's checksum.
    pub(super) fn record_begin(&mut self, payload: &[u8], sum: u64, sent_us: u64) {
        if self.trx_log.max == 0 || self.sharding.is_some() {
            return;
        }
        let on = self.held_conn();
        if self.trx_log.follow(on, true) && self.trx_log.refused.is_none() {
            self.trx_log.push(payload, None, sum, 0, sent_us);
        }
    }

    /// After a command that is not recorded (`what`; `kind`: its reason
    /// in `sextant_admin::REPLAY_REFUSALS`): inside a transaction, the
    /// transaction is not replayed; outside one, whatever transaction was
    /// recorded is over.
    pub(super) fn record_other(&mut self, kind: &str, what: &str) {
        let on = self.held_conn();
        if self.trx_log.max > 0 && self.trx_log.follow(on, self.in_transaction()) {
            self.trx_log
                .refuse(kind, format!("{what} inside the transaction"));
        }
    }

    /// The held connection, as a record's stamp.
    pub(super) fn held_conn(&self) -> Option<(usize, u32)> {
        self.binding.direct().map(|a| {
            (
                std::sync::Arc::as_ptr(&a.server) as usize,
                a.conn().connection_id,
            )
        })
    }

    /// Whether the transaction open on the connection `lost` (a stamp)
    /// is recorded, for a replay.
    pub(super) fn replayable(&self, lost: Option<(usize, u32)>) -> bool {
        self.trx_log.max > 0
            && self.sharding.is_none()
            && lost.is_some_and(|l| self.trx_log.is_on(l))
    }

    /// Runs the recorded transaction again on a new connection to the
    /// group's primary (waiting for one, as a write does). Err: why not;
    /// the session then holds no connection.
    pub(super) async fn replay(&mut self) -> Result<(), String> {
        let counters = &self.shared.counters;
        counters.replays.fetch_add(1, Ordering::Relaxed);
        if let Some((kind, why)) = self.trx_log.refused.clone() {
            counters.replays_refused.fetch_add(1, Ordering::Relaxed);
            if let Some(n) = counters.replays_refused_by.get(kind) {
                n.fetch_add(1, Ordering::Relaxed);
            }
            return Err(why);
        }
        let log = std::mem::take(&mut self.trx_log);
        let out = self.replay_log(&log).await;
        self.trx_log = log;
        match &out {
            Ok(()) => {
                self.trx_log.stamp = self.held_conn();
                let counters = &self.shared.counters;
                counters.replays_done.fetch_add(1, Ordering::Relaxed);
                tracing::info!(parent: &self.span, statements = self.trx_log.ends.len(), "transaction replayed on a new connection");
            }
            Err((why, mismatch)) => {
                let counters = &self.shared.counters;
                let counter = match mismatch {
                    true => &counters.replays_mismatched,
                    false => &counters.replays_failed,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tracing::info!(parent: &self.span, "transaction not replayed: {why}");
                self.detach_discard();
            }
        }
        out.map_err(|(why, _)| why)
    }

    /// Err: why, and whether an answer differed.
    async fn replay_log(&mut self, log: &Log) -> Result<(), (String, bool)> {
        Box::pin(self.attach(Target::Primary))
            .await
            .map_err(|e| (format!("no primary to run it again on: {e}"), false))?;
        let mut packet = Vec::new();
        let mut from = 0;
        let mut pinned = false;
        for (n, e) in log.ends.iter().enumerate() {
            let (end, sum, insert_id) = (e.end, e.sum, e.insert_id);
            let recorded = &log.buf[from..end];
            from = end;
            let text = e.stmt.as_deref().unwrap_or(&recorded[1..]);
            let Some(a) = self.binding.direct_mut() else {
                return Err(("its new connection was lost".into(), false));
            };
            let conn = a.conn_mut();
            if reads_the_time(text) {
                // NOW() and its kin read the time the first run was sent
                // (sextant's clock: the server's own, within the clocks'
                // skew, for a value the client never saw; one it saw
                // matches unless a second's boundary fell in between).
                let sql = format!(
                    "SET timestamp = {}.{:06}",
                    e.sent_us / 1_000_000,
                    e.sent_us % 1_000_000
                );
                if let Err(e) = conn.query_internal(&sql).await {
                    return Err((format!("its new connection failed: {e}"), false));
                }
                pinned = true;
            }
            if insert_id != 0 {
                // The first run's auto-increment values were used up (a
                // rollback does not give them back): the second run takes
                // the same ones, free since that rollback.
                if let Err(e) = conn
                    .query_internal(&format!("SET insert_id = {insert_id}"))
                    .await
                {
                    return Err((format!("its new connection failed: {e}"), false));
                }
            }
            packet.clear();
            let expect = match &e.stmt {
                None => {
                    write_packet(&mut packet, 0, recorded);
                    Expect::Query
                }
                Some(sql) => {
                    // Prepared on this connection as any execution is,
                    // its id put in the recorded execution.
                    let server = match conn.ensure_prepared(sql).await {
                        Ok(s) => s,
                        Err(e) => {
                            return Err((
                                format!("its statement did not prepare again: {e}"),
                                false,
                            ))
                        }
                    };
                    conn.stmt_used(sql, true);
                    let at = sextant_protocol::codec::begin_packet(&mut packet);
                    packet.extend_from_slice(recorded);
                    packet[at + 5..at + 9].copy_from_slice(&server.id.to_le_bytes());
                    sextant_protocol::codec::finish_packet(&mut packet, at, 0);
                    Expect::Execute
                }
            };
            let ran = match conn.write_raw(&packet).await {
                Ok(()) => crate::checksum::read_answer(conn, expect).await,
                Err(e) => Err(e),
            };
            match ran {
                Err(e) => return Err((format!("its new connection failed: {e}"), false)),
                Ok(got) if got != sum => {
                    let text = String::from_utf8_lossy(&text[..text.len().min(80)]);
                    return Err((
                        format!(
                            "statement {} of the transaction ({text}) answered differently the second time",
                            n + 1
                        ),
                        true,
                    ));
                }
                Ok(_) => {}
            }
        }
        if pinned {
            if let Some(a) = self.binding.direct_mut() {
                if let Err(e) = a.conn_mut().query_internal("SET timestamp = DEFAULT").await {
                    return Err((format!("its new connection failed: {e}"), false));
                }
            }
        }
        match self.binding.direct() {
            Some(a) if a.conn().in_transaction() || log.ends.is_empty() => Ok(()),
            _ => Err((
                "it was not in a transaction after its statements ran again".into(),
                false,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(sql: &str) -> Classification<'_> {
        sextant_sql::classify(sql.as_bytes())
    }

    #[test]
    fn what_keeps_a_transaction_from_replay() {
        let ok = RelayResult::default();
        let cases: &[(&str, Option<&str>)] = &[
            ("INSERT INTO t VALUES (1)", None),
            ("UPDATE t SET a = a + 1 WHERE id = 3", None),
            ("SELECT * FROM t WHERE id = 3 FOR UPDATE", None),
            ("SAVEPOINT s1", None),
            ("ROLLBACK TO SAVEPOINT s1", None),
            ("BEGIN", None),
            ("INSERT INTO t VALUES (NOW(), UUID())", None),
            (
                "CREATE TEMPORARY TABLE x (a INT)",
                Some("a temporary table"),
            ),
            ("SELECT GET_LOCK('a', 1)", Some("a named lock (GET_LOCK)")),
            ("SET @x = 1", Some("a user variable")),
            ("INSERT INTO t VALUES (@x)", Some("a user variable")),
            ("SET sql_mode = ''", Some("a session setting changed")),
            ("USE other", Some("a session setting changed")),
            ("CALL p()", Some("CALL")),
            (
                "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
                Some("several statements"),
            ),
            (
                "INSERT INTO u VALUES (LAST_INSERT_ID())",
                Some("LAST_INSERT_ID()"),
            ),
            (
                "SELECT * FROM t INTO OUTFILE '/tmp/x'",
                Some("SELECT ... INTO OUTFILE"),
            ),
        ];
        for (sql, want) in cases {
            let c = classify(sql);
            let got = refusal(c.kind, c.flags, &ok).map(|(_, why)| why);
            match want {
                None => assert_eq!(got, None, "{sql}"),
                Some(w) => assert!(got.is_some_and(|g| g.starts_with(w)), "{sql}: {got:?}"),
            }
        }
        let changed = RelayResult {
            vars_changed: true,
            ..Default::default()
        };
        let c = classify("SELECT 1");
        assert!(refusal(c.kind, c.flags, &changed).is_some());
    }

    #[test]
    fn statements_reading_the_time_are_found() {
        assert!(reads_the_time(b"\x03insert into t values (now(6))"));
        assert!(reads_the_time(b"\x03SELECT CURRENT_TIMESTAMP"));
        assert!(reads_the_time(b"\x03select unix_timestamp()"));
        assert!(!reads_the_time(b"\x03SELECT SYSDATE()"));
        assert!(!reads_the_time(b"\x03UPDATE t SET known = 1"));
    }

    #[test]
    fn records_are_bounded_per_session_and_in_all() {
        let mut log = Log::default();
        (log.max, log.total_max) = (100, usize::MAX);
        log.open = true;
        log.push(b"\x03INSERT INTO t VALUES (1)", None, 1, 0, 0);
        assert!(log.refused.is_none() && log.ends.len() == 1);
        log.push(&[b'x'; 90], None, 2, 0, 0);
        assert!(log
            .refused
            .as_ref()
            .filter(|(k, _)| sextant_admin::REPLAY_REFUSALS[*k] == "size")
            .map(|(_, w)| w.as_str())
            .is_some_and(|w| w.contains("replay_max_bytes")));
        assert!(
            log.ends.is_empty() && log.held == 0,
            "a refused record holds nothing"
        );
        log.clear();
        assert!(log.refused.is_none() && !log.open);
        let before = HELD.load(Ordering::Relaxed);
        let mut small = Log::default();
        (small.max, small.total_max) = (1000, before + 10);
        small.push(b"\x03SELECT 1", None, 3, 0, 0);
        assert!(small
            .refused
            .as_ref()
            .map(|(_, w)| w.as_str())
            .is_some_and(|w| w.contains("replay_max_total_bytes")));
    }
}
