//! Query digests, counted where the statements run: each thread keeps its
//! own table (a thread-local; a session never leaves its thread), so the
//! statement path takes no lock and, once a digest is known, allocates
//! nothing. The admin port asks every thread for its rows (through the
//! thread's work channel) and merges them.

use sextant_admin::commands::digests::{DigestRow, BUCKETS_US};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Where a statement ran, for the digest's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    Primary,
    Replica,
    Other,
}

struct Table {
    map: HashMap<u64, DigestRow, BuildHasherDefault<KeyHasher>>,
    /// The digest of the statement being recorded, as bytes (reused).
    scratch: Vec<u8>,
}

/// The map's keys are hashes already ([`sextant_sql::digest::digest_key`]):
/// hashing them again would be work for nothing.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The row that takes the statements of new digests once a thread holds
/// `max` of them: memory stays bounded whatever the statements.
const OVERFLOW: u64 = 0;

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        map: HashMap::default(),
        scratch: Vec::new(),
    });
}

/// Runs `f` with this thread's digest scratch (None if it is in use):
/// for a pass over a statement's tokens that builds its digest on the way
/// ([`sextant_sql::digest::Digester`]).
pub fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> Option<R> {
    TABLE.with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        Some(f(&mut t.scratch))
    })
}

/// Counts one statement under its digest. `key`: the digest's key when
/// already known (built while the statement was classified), so that a
/// digest seen before costs no second reading of the statement.
#[allow(clippy::too_many_arguments)]
pub fn record(
    sql: &[u8],
    mode: sextant_sql::LexMode,
    key: Option<u64>,
    max: usize,
    took_us: u64,
    rows: u64,
    error: bool,
    ran: Ran,
) {
    TABLE.with(|t| {
        let Ok(mut t) = t.try_borrow_mut() else {
            return;
        };
        let t = &mut *t;
        let mut hash = match key {
            Some(k) if t.map.contains_key(&k) => k,
            _ => {
                sextant_sql::digest::digest_bytes(sql, mode, &mut t.scratch);
                sextant_sql::digest::digest_key(&t.scratch)
            }
        };
        if !t.map.contains_key(&hash) && t.map.len() >= max {
            hash = OVERFLOW;
        }
        let row = t.map.entry(hash).or_insert_with(|| DigestRow {
            hash,
            text: match hash {
                OVERFLOW => "(other digests: this thread holds query_digests_max)".into(),
                _ => String::from_utf8_lossy(&t.scratch).into_owned(),
            },
            min_us: took_us,
            ..Default::default()
        });
        row.count += 1;
        row.errors += error as u64;
        row.rows += rows;
        row.sum_us += took_us;
        row.min_us = row.min_us.min(took_us);
        row.max_us = row.max_us.max(took_us);
        row.buckets[BUCKETS_US.partition_point(|&b| b < took_us)] += 1;
        match ran {
            Ran::Primary => row.primary += 1,
            Ran::Replica => row.replica += 1,
            Ran::Other => row.other += 1,
        }
    });
}

/// This thread's rows.
pub fn snapshot() -> Vec<DigestRow> {
    TABLE.with(|t| t.borrow().map.values().cloned().collect())
}

/// Forgets this thread's digests.
pub fn reset() {
    TABLE.with(|t| t.borrow_mut().map.clear());
}

/// Every thread's query digests: this thread's and each worker's.
pub(crate) async fn gather_digests(
    shared: &crate::shared::Shared,
) -> Vec<sextant_admin::commands::digests::DigestRow> {
    let mut rows = snapshot();
    for w in shared.workers.get().into_iter().flatten() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if w.send(crate::work::Work::Digests(tx)).is_ok() {
            if let Ok(Ok(mut r)) = tokio::time::timeout(std::time::Duration::from_secs(5), rx).await
            {
                rows.append(&mut r);
            }
        }
    }
    rows
}

/// Forgets every thread's query digests.
pub(crate) fn reset_digests(shared: &crate::shared::Shared) {
    reset();
    for w in shared.workers.get().into_iter().flatten() {
        let _ = w.send(crate::work::Work::ResetDigests);
    }
}
