//! What a statement leaves behind on its session, decided in one place.
//!
//! The plan says where a statement runs; once its answer is in, [`effects`]
//! says what the session must remember: which reasons to keep its server
//! connection begin or end ([`Pins`]), whether reads stay on the primary
//! for a while, the insert id, the write's GTID, whether the catalogue is
//! stale, whether the client's timeouts changed. It is a pure function of
//! the statement, how it ran and what its answer reported, so a text
//! statement and the same statement prepared get the same effects, and
//! the cases are golden files (`testdata/effects/`). The session applies
//! the value and does nothing else after a statement.

use crate::rules::Target;
use sextant_sql::{Classification, Flags, Kind};

bitflags::bitflags! {
    /// Reasons a session must keep its server connection.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Pins: u8 {
        /// User variables, temporary tables, named locks, SQL PREPARE,
        /// HANDLER, or anything else the server said changed and sextant
        /// cannot replay.
        const OPAQUE = 1;
        const LOCK_TABLES = 1 << 1;
        const CURSOR = 1 << 2;
        const LONG_DATA = 1 << 3;
        /// SET TRANSACTION applies to the next transaction of this
        /// connection.
        const NEXT_TRX = 1 << 4;
        /// SQL_CALC_FOUND_ROWS: FOUND_ROWS() must run on the same
        /// connection.
        const FOUND_ROWS = 1 << 5;
        /// SET insert_id: the next statement (the INSERT) must run on the
        /// same connection.
        const INSERT_ID = 1 << 6;
    }
}

impl Pins {
    /// The pin's name, as golden files and logs show it.
    pub fn names(self) -> Vec<&'static str> {
        self.iter_names().map(|(n, _)| n).collect()
    }
}

/// What a statement is, as far as its effects go: the same whether it
/// came as text or as a prepared statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    pub kind: Kind,
    pub flags: Flags,
    pub read_only: bool,
}

impl Statement {
    pub fn of(c: &Classification<'_>) -> Statement {
        Statement {
            kind: c.kind,
            flags: c.flags,
            read_only: c.read_only,
        }
    }
}

/// The command that carried the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// COM_QUERY.
    Query,
    /// COM_STMT_EXECUTE; `cursor`: it asked for a read-only cursor.
    Execute { cursor: bool },
    /// MariaDB's COM_STMT_BULK_EXECUTE.
    Bulk,
    /// COM_STMT_SEND_LONG_DATA: a parameter now waits on the connection.
    LongData,
    /// COM_STMT_FETCH from an open cursor.
    Fetch,
    /// COM_STMT_RESET: the statement's cursor and long data are gone.
    StmtReset,
}

/// What the answer reported, from the relay and the server's session
/// tracking. `None` in [`effects`]: no answer was relayed (the statement
/// failed and the client has been told).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Answer {
    pub error: bool,
    /// The server's status: inside a transaction.
    pub in_transaction: bool,
    /// The server's status: a cursor is open.
    pub cursor_open: bool,
    /// The server's status: a fetch reached the cursor's last row.
    pub last_row_sent: bool,
    /// The last non-zero insert id an OK carried.
    pub last_insert_id: u64,
    /// `SET LAST_INSERT_ID = N` (said only in a session-state report).
    pub last_insert_id_set: Option<u64>,
    /// The server reported the `insert_id` variable set.
    pub insert_id_reported: bool,
    /// The connection holds state sextant cannot replay.
    pub opaque: bool,
    /// The server reported the GTID of a write.
    pub wrote: bool,
    /// The session's variables changed.
    pub vars_changed: bool,
    /// The server said the connection is ending.
    pub connection_ending: bool,
}

/// Everything a statement changes in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Effects {
    /// Reasons to keep the connection that begin (never also in `unpin`).
    pub pin: Pins,
    /// Reasons that end.
    pub unpin: Pins,
    /// Reads stay on the held primary connection for `hold_ms`: they
    /// follow a write, which replicas may not have yet.
    pub hold_primary_reads: bool,
    /// The session's LAST_INSERT_ID() is now this, on this connection.
    pub insert_id: Option<u64>,
    /// The write's GTID is the session's (and its user's) newest.
    pub record_write: bool,
    /// A view, function or table may have come or gone: how reads
    /// classify may change.
    pub catalogue_stale: bool,
    /// net_read_timeout / net_write_timeout may have changed: the
    /// client's timeouts follow them.
    pub client_timeouts: bool,
}

impl Effects {
    /// The session's connection was closed or reset under it: whatever
    /// kept it there is gone.
    pub fn connection_gone() -> Effects {
        Effects {
            unpin: Pins::all(),
            ..Default::default()
        }
    }

    /// The pins after these effects.
    pub fn pins_after(&self, before: Pins) -> Pins {
        (before - self.unpin) | self.pin
    }
}

/// What statement `st`, run by `ran` on a server of `target` (its plan's),
/// changes in its session, given its `answer`.
pub fn effects(st: &Statement, ran: Ran, target: Target, answer: Option<&Answer>) -> Effects {
    let mut e = Effects::default();
    match ran {
        Ran::Query | Ran::Execute { .. } | Ran::Bulk => {}
        Ran::LongData => {
            e.pin = Pins::LONG_DATA;
            return e;
        }
        Ran::StmtReset => {
            e.unpin = Pins::CURSOR | Pins::LONG_DATA;
            return e;
        }
        Ran::Fetch => {
            if !matches!(answer, Some(a) if !a.error && !a.last_row_sent) {
                e.unpin = Pins::CURSOR;
            }
            return e;
        }
    }
    if matches!(ran, Ran::Execute { .. } | Ran::Bulk) {
        // The parameters sent ahead were used (or lost with the attempt).
        e.unpin |= Pins::LONG_DATA;
    }
    let Some(a) = answer else {
        if st.kind != Kind::Set {
            e.unpin |= Pins::INSERT_ID;
        }
        return e;
    };
    if a.connection_ending {
        return Effects {
            record_write: a.wrote,
            insert_id: insert_id(a),
            ..Effects::connection_gone()
        };
    }
    let (mut pin, mut unpin) = (Pins::empty(), e.unpin);
    if st.kind != Kind::Set {
        // The statement after SET insert_id has run: it used it.
        unpin |= Pins::INSERT_ID;
    } else if a.insert_id_reported {
        pin |= Pins::INSERT_ID;
    }
    if st.flags.contains(Flags::FOUND_ROWS) {
        pin |= Pins::FOUND_ROWS;
    } else {
        unpin |= Pins::FOUND_ROWS;
    }
    if st.flags.pins_session() || a.opaque {
        pin |= Pins::OPAQUE;
    }
    if st.flags.contains(Flags::LOCK_TABLES) {
        pin |= Pins::LOCK_TABLES;
    }
    if st.flags.contains(Flags::UNLOCK_TABLES) {
        unpin |= Pins::LOCK_TABLES;
    }
    // SET TRANSACTION's characteristics wait on the connection for its
    // next transaction. A statement with autocommit may or may not take
    // them (MariaDB keeps them past a SELECT that reads no table, and
    // past a failed ROLLBACK TO SAVEPOINT): they are known gone only once
    // a transaction has opened, or a COMMIT or ROLLBACK ran.
    if st.flags.contains(Flags::NEXT_TRX) && !a.error {
        pin |= Pins::NEXT_TRX;
    } else if a.in_transaction || (matches!(st.kind, Kind::Commit | Kind::Rollback) && !a.error) {
        unpin |= Pins::NEXT_TRX;
    }
    if let Ran::Execute { cursor: true } = ran {
        if a.cursor_open && !a.error {
            pin |= Pins::CURSOR;
        }
    }
    e.pin = pin;
    e.unpin = unpin - pin;
    // A read that calls a stored function may have written through it.
    e.hold_primary_reads = target == Target::Primary
        && (!st.read_only || st.flags.intersects(Flags::MAY_WRITE_FUNCTION));
    e.insert_id = insert_id(a);
    e.record_write = a.wrote;
    e.catalogue_stale = st.flags.contains(Flags::CATALOGUE);
    e.client_timeouts = a.vars_changed;
    e
}

/// The insert id the answer leaves as the session's: a generated id, else
/// one set with `SET LAST_INSERT_ID = N`.
fn insert_id(a: &Answer) -> Option<u64> {
    match a.last_insert_id {
        0 => a.last_insert_id_set,
        n => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_sql::classify;

    fn st(sql: &str) -> Statement {
        Statement::of(&classify(sql.as_bytes()))
    }

    #[test]
    fn a_pin_that_begins_is_never_also_ended() {
        let a = Answer {
            insert_id_reported: true,
            ..Default::default()
        };
        for sql in ["SET insert_id = 5", "LOCK TABLES t WRITE", "SET @x = 1"] {
            let e = effects(&st(sql), Ran::Query, Target::Primary, Some(&a));
            assert!((e.pin & e.unpin).is_empty(), "{sql}: {e:?}");
            assert!(!e.pin.is_empty(), "{sql}: {e:?}");
        }
    }

    #[test]
    fn a_lost_answer_ends_only_what_the_command_consumed() {
        let e = effects(
            &st("INSERT INTO t VALUES (?)"),
            Ran::Execute { cursor: false },
            Target::Primary,
            None,
        );
        assert_eq!(
            (e.pin, e.unpin),
            (Pins::empty(), Pins::LONG_DATA | Pins::INSERT_ID)
        );
        assert!(!e.hold_primary_reads && !e.record_write);
    }
}
