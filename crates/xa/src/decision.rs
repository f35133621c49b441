//! Decisions kept with the data: a distributed transaction's commit
//! decision is a row of `sextant.xa_decision` in one participant group
//! (the decider), written by sextant's own account once every branch is
//! prepared, so that it survives the loss of the instance that made it
//! and is replicated with the group's data. Every branch commits after
//! it. No application account needs any privilege on the table.
//!
//! Whoever finds a branch prepared (its owner's recovery, or any live
//! instance once the owner's lease expired) settles the transaction on
//! the decider: a committed `C` row means commit. Without one it inserts
//! an `R` row; the primary key makes that race the owner's own insert, so
//! exactly one of "commit" and "roll back" wins.
//!
//! Building the statements and reading their answers is pure; the proxy
//! sends them.

/// The schema and table, created on every group's primary.
pub const TABLE: &str = "sextant.xa_decision";

/// Creates the table where it is missing (the recovery account runs it).
pub const CREATE: [&str; 2] = [
    "CREATE DATABASE IF NOT EXISTS sextant",
    "CREATE TABLE IF NOT EXISTS sextant.xa_decision (\
     gtrid VARBINARY(64) NOT NULL PRIMARY KEY, \
     decision CHAR(1) NOT NULL, \
     owner VARCHAR(32) NOT NULL, \
     at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)\
     ) ENGINE=InnoDB",
];

/// How long (seconds) a settled transaction's row is kept after none of
/// its branches is left prepared: an `R` row must outlive any owner that
/// could still try to commit (its lease expired long before), and a `C`
/// row of a dead owner has nobody else to remove it.
pub const KEEP_S: u64 = 600;

/// What a decision row says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Commit,
    Rollback,
}

impl Verdict {
    pub fn letter(self) -> char {
        match self {
            Verdict::Commit => 'C',
            Verdict::Rollback => 'R',
        }
    }

    pub fn from_letter(s: &str) -> Option<Verdict> {
        match s {
            "C" => Some(Verdict::Commit),
            "R" => Some(Verdict::Rollback),
            _ => None,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The row deciding `gtrid` (owner `owner`).
pub fn insert_sql(gtrid: &[u8], verdict: Verdict, owner: &str) -> String {
    format!(
        "INSERT INTO {TABLE} (gtrid, decision, owner) VALUES (X'{}', '{}', '{}')",
        hex(gtrid),
        verdict.letter(),
        owner.replace('\'', "")
    )
}

/// The decision of `gtrid`, if any: one row of one column.
pub fn select_sql(gtrid: &[u8]) -> String {
    format!(
        "SELECT decision FROM {TABLE} WHERE gtrid = X'{}'",
        hex(gtrid)
    )
}

/// Removes the rows of `gtrids` (nothing when empty).
pub fn delete_sql<'a>(gtrids: impl IntoIterator<Item = &'a [u8]>) -> Option<String> {
    let list: Vec<String> = gtrids
        .into_iter()
        .map(|g| format!("X'{}'", hex(g)))
        .collect();
    (!list.is_empty()).then(|| format!("DELETE FROM {TABLE} WHERE gtrid IN ({})", list.join(",")))
}

/// The rows old enough to be removed once nothing of them is prepared:
/// gtrid (hex), decision, owner, age in seconds.
pub fn old_rows_sql(limit: usize) -> String {
    format!(
        "SELECT HEX(gtrid), decision, owner, TIMESTAMPDIFF(SECOND, at, NOW(3)) FROM {TABLE} \
         WHERE at < NOW(3) - INTERVAL {KEEP_S} SECOND LIMIT {limit}"
    )
}

/// The verdict in the answer to [`select_sql`].
pub fn verdict_of(rows: &[Vec<Option<String>>]) -> Option<Verdict> {
    rows.first()?
        .first()?
        .as_deref()
        .and_then(Verdict::from_letter)
}

/// Bytes of a `HEX()` column.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_nothing_from_outside() {
        assert_eq!(
            insert_sql(b"sx:a:1:2", Verdict::Commit, "a"),
            "INSERT INTO sextant.xa_decision (gtrid, decision, owner) VALUES (X'73783a613a313a32', 'C', 'a')"
        );
        assert_eq!(
            select_sql(b"g"),
            "SELECT decision FROM sextant.xa_decision WHERE gtrid = X'67'"
        );
        assert_eq!(delete_sql(Vec::<&[u8]>::new()), None);
        assert_eq!(
            delete_sql([&b"a"[..], b"b"]).unwrap(),
            "DELETE FROM sextant.xa_decision WHERE gtrid IN (X'61',X'62')"
        );
    }

    #[test]
    fn verdicts_and_hex_read_back() {
        let row = |v: &str| vec![vec![Some(v.to_string())]];
        assert_eq!(verdict_of(&row("C")), Some(Verdict::Commit));
        assert_eq!(verdict_of(&row("R")), Some(Verdict::Rollback));
        assert_eq!(verdict_of(&row("X")), None);
        assert_eq!(verdict_of(&[]), None);
        assert_eq!(unhex("73783A61").unwrap(), b"sx:a");
        assert_eq!(unhex("7"), None);
        assert_eq!(unhex("zz"), None);
    }
}
