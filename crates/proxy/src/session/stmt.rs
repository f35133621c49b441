//! The statement being run, as one value: what its plan asks of the server
//! that runs it and what its attempts have done so far. It begins with the
//! plan (`Session::require`) and is dropped when the statement is over
//! (`Session::read_done`); between statements it is empty, so nothing of
//! one statement can steer the next.

use sextant_backend::gtid::Gtid;
use sextant_routing::Retry;

pub(super) struct Stmt {
    /// The retry the current attempt may ask for: its plan's, except on
    /// the last attempt (`run_plan` sets it).
    pub retry: Retry,
    /// read_your_writes: the write a replica must have applied.
    pub need: Option<Gtid>,
    /// read_your_writes over a fleet: `need` must still take in the
    /// writes other instances acknowledged, read from the primary's
    /// position before the statement is placed (`Session::fleet_need`).
    pub fleet: bool,
    /// The primary's position could not be read for a read that needed
    /// it: the read goes to the primary.
    pub to_primary: bool,
    /// monotonic: it must not read older data than the session has seen.
    pub mono: bool,
    /// Its wait on a replica for the write it must see.
    pub wait: ReplicaWait,
    /// A prepared statement's execution whose text may write and answer
    /// with rows (INSERT ... RETURNING, CALL): read-your-writes asks for
    /// its GTID when no OK packet carried it.
    pub writes_rows: bool,
    /// Session set-up: a primary that does not answer is not waited for
    /// (a replica serves it instead).
    pub setup: bool,
    /// A text statement that cannot end a transaction (a plain read or
    /// write, ROLLBACK, SAVEPOINT: not COMMIT, DDL, SET, CALL or several
    /// statements): if its server connection dies inside a transaction,
    /// the transaction is certainly rolled back, not of unknown outcome.
    pub cannot_commit: bool,
    /// A BEGIN (or START TRANSACTION) sent with no transaction open: it
    /// commits nothing, so one whose connection died runs again.
    pub clean_begin: bool,
    /// A COMMIT or ROLLBACK (not to a savepoint): the plain end of a
    /// transaction.
    pub ends_trx: bool,
    /// A read that may be sent in the same write as a held-back BEGIN
    /// (deferred.rs): if the BEGIN failed, it ran with autocommit and
    /// changed nothing.
    pub begin_rides: bool,
    /// Times its transaction was replayed after its connection was lost
    /// (bounded: a server that keeps failing is reported).
    pub replays: u8,
}

impl Default for Stmt {
    fn default() -> Self {
        Stmt {
            retry: Retry::Never,
            need: None,
            fleet: false,
            to_primary: false,
            mono: false,
            setup: false,
            cannot_commit: false,
            clean_begin: false,
            begin_rides: false,
            ends_trx: false,
            replays: 0,
            wait: ReplicaWait::default(),
            writes_rows: false,
        }
    }
}

/// read_your_writes: a read that must see a write no replica is known to
/// have waits for it on a replica (MASTER_GTID_WAIT) rather than going to
/// the primary. Per statement: set while it is placed, cleared after.
#[derive(Default)]
pub(super) struct ReplicaWait {
    /// The statement is sent right after its connection is attached
    /// (run_plan), so the wait can travel in the same write, ahead of it.
    /// Otherwise the wait is a round trip of its own before it.
    pub pipelined: bool,
    /// Attached to a replica not known to have this write: the wait goes
    /// ahead of the statement (forward.rs).
    pub pending: Option<Gtid>,
    /// A wait of this statement ran out of time: it reads the primary.
    pub gave_up: bool,
}
