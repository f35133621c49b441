//! Per-thread traffic counters: statements by kind and by the routing rule
//! that placed them, errors sextant itself answered by code, and bytes to
//! and from clients. Each thread owns one block of atomics (registered once,
//! when the thread first counts) and only it writes there, so a count is
//! one uncontended relaxed add and no lock; readers add the blocks up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Statement kinds as counted (a coarse grouping of the classifier's).
pub const KINDS: [&str; 7] = [
    "read",
    "write",
    "transaction",
    "ddl",
    "session",
    "admin",
    "other",
];

/// The error codes sextant answers itself, counted one by one; others
/// fall in the last slot.
pub const ERROR_CODES: [u16; 30] = [
    1038, 1040, 1041, 1043, 1045, 1047, 1053, 1094, 1095, 1129, 1153, 1156, 1157, 1159, 1180, 1226,
    1235, 1243, 1290, 1402, 1461, 1792, 1835, 3159, 4031, 9001, 9002, 9003, 9004, 9005,
];

const RULES: usize = sextant_routing::Rule::ALL.len();

pub struct Block {
    kinds: [AtomicU64; KINDS.len()],
    rules: [AtomicU64; RULES],
    errors: [AtomicU64; ERROR_CODES.len() + 1],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Block {
    fn new() -> Block {
        Block {
            kinds: Default::default(),
            rules: Default::default(),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        }
    }
}

static BLOCKS: Mutex<Vec<Arc<Block>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<Block> = {
        let b = Arc::new(Block::new());
        BLOCKS.lock().unwrap_or_else(|e| e.into_inner()).push(b.clone());
        b
    };
}

#[inline]
fn add(f: impl FnOnce(&Block) -> &AtomicU64, n: u64) {
    MINE.with(|b| f(b).fetch_add(n, Ordering::Relaxed));
}

/// The kind slot of a classified statement.
pub fn kind_index(k: sextant_sql::Kind) -> usize {
    use sextant_sql::Kind::*;
    match k {
        Select | Show | Explain | Handler => 0,
        Insert | Update | Delete | Replace | Load | Call | Do => 1,
        Begin | Commit | Rollback | Savepoint | Xa | Lock | Unlock => 2,
        Ddl => 3,
        Set | Use | Prepare | Execute | Deallocate => 4,
        Flush | Kill => 5,
        _ => 6,
    }
}

#[inline]
pub fn statement(kind: sextant_sql::Kind, rule: sextant_routing::Rule) {
    MINE.with(|b| {
        b.kinds[kind_index(kind)].fetch_add(1, Ordering::Relaxed);
        b.rules[rule.index()].fetch_add(1, Ordering::Relaxed);
    });
}

pub fn error(code: u16) {
    let i = ERROR_CODES
        .iter()
        .position(|c| *c == code)
        .unwrap_or(ERROR_CODES.len());
    add(|b| &b.errors[i], 1);
}

#[inline]
pub fn bytes_in(n: usize) {
    add(|b| &b.bytes_in, n as u64);
}

#[inline]
pub fn bytes_out(n: usize) {
    add(|b| &b.bytes_out, n as u64);
}

/// Every thread's counts added up.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub kinds: [u64; KINDS.len()],
    pub rules: [u64; RULES],
    pub errors: [u64; ERROR_CODES.len() + 1],
    pub bytes_in: u64,
    pub bytes_out: u64,
}

pub fn totals() -> Totals {
    let mut t = Totals {
        errors: [0; ERROR_CODES.len() + 1],
        ..Default::default()
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    for b in BLOCKS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        for (x, a) in t.kinds.iter_mut().zip(&b.kinds) {
            *x += load(a);
        }
        for (x, a) in t.rules.iter_mut().zip(&b.rules) {
            *x += load(a);
        }
        for (x, a) in t.errors.iter_mut().zip(&b.errors) {
            *x += load(a);
        }
        t.bytes_in += load(&b.bytes_in);
        t.bytes_out += load(&b.bytes_out);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_count_apart_and_add_up() {
        let before = totals();
        let handles: Vec<_> = (0..3)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..100 {
                        statement(sextant_sql::Kind::Select, sextant_routing::Rule::Read);
                    }
                    error(1045);
                    error(65000);
                    bytes_in(10);
                    bytes_out(7);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let t = totals();
        assert_eq!(t.kinds[0] - before.kinds[0], 300);
        assert_eq!(
            t.rules[sextant_routing::Rule::Read.index()]
                - before.rules[sextant_routing::Rule::Read.index()],
            300
        );
        let i = ERROR_CODES.iter().position(|c| *c == 1045).unwrap();
        assert_eq!(t.errors[i] - before.errors[i], 3);
        assert_eq!(
            t.errors[ERROR_CODES.len()] - before.errors[ERROR_CODES.len()],
            3
        );
        assert_eq!(
            (t.bytes_in - before.bytes_in, t.bytes_out - before.bytes_out),
            (30, 21)
        );
        assert_eq!(
            sextant_routing::Rule::ALL[sextant_routing::Rule::Cursor.index()],
            sextant_routing::Rule::Cursor
        );
    }
}
