//! What ROW_COUNT(), FOUND_ROWS() and @@warning_count return after a
//! statement, kept by sextant from the answers it relayed or made: a
//! server keeps them per connection, and the statement that reads them
//! may run on another connection (a pooled one, a replica's, another
//! group's) than the statement before. Where sextant knows the value it writes it into the
//! statement in place of the call; where it does not, the call goes to
//! the server connection as written.

use crate::relay::{Ended, RelayResult};
use sextant_routing::Statement;
use sextant_sql::{Flags, Kind};

/// Where one of these values is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Val<T> {
    /// Sextant knows it, and writes it in.
    Known(T),
    /// The server connection that ran the statement before holds it.
    #[default]
    Connection,
    /// No one connection holds it as one server would (the statement ran
    /// over several groups, or a write counted one group's rows).
    Nowhere,
    /// The connection that held it went back to the pool.
    Gone,
    /// One of two values, and no connection can tell which (FOUND_ROWS()
    /// after an aggregate whose WHERE the server may find impossible).
    Unsure,
}

impl<T: Copy> Val<T> {
    pub fn known(self) -> Option<T> {
        match self {
            Val::Known(v) => Some(v),
            _ => None,
        }
    }
}

/// ROW_COUNT(), FOUND_ROWS() and @@warning_count of the session's
/// statement before.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Last {
    pub row_count: Val<i64>,
    pub found_rows: Val<u64>,
    /// Where the conditions SHOW WARNINGS lists are: Known(0) none,
    /// Known(n) sextant's own error (the session keeps its text),
    /// Connection on the connection the session holds.
    pub warnings: Val<u16>,
    /// @@warning_count where sextant knows it though the conditions are
    /// a connection's (the count the statement's answer reported).
    pub warning_count: Option<u16>,
}

impl Last {
    /// After statement `st`, answered with `res` (None: it failed, and the
    /// client was told).
    ///
    /// As MariaDB keeps them: ROW_COUNT() is -1 after a result set or an
    /// error and the rows an OK reports as affected otherwise; FOUND_ROWS()
    /// is the number of rows a SELECT sent (its total before LIMIT with
    /// SQL_CALC_FOUND_ROWS, which only the server knows) and stays as it
    /// was across errors and transaction control. Other statements change
    /// FOUND_ROWS() in ways of their own (a subquery in a SET or an
    /// UPDATE, SELECT ... INTO, SHOW, DELETE ... RETURNING), a CALL or
    /// several statements in one packet leave what their last inner
    /// statement left, and warnings stay from one statement to the next
    /// when the next uses no table: those are the connection's.
    /// `text`: what the statement's text has in it (a write with a
    /// subquery reading a table sets FOUND_ROWS() to that subquery's rows;
    /// SQL_CALC_FOUND_ROWS makes it a count only the server knows).
    pub fn after(self, st: &Statement, res: Option<&RelayResult>, text: Text) -> Last {
        let selects = text.selects;
        let error = res.is_none_or(|r| r.error);
        if error {
            return Last {
                row_count: Val::Known(-1),
                found_rows: self.found_rows,
                warnings: Val::Connection,
                warning_count: None,
            };
        }
        let Some(res) = res else { return self };
        if st.kind == Kind::Call || st.flags.contains(Flags::MULTI) || res.results != 1 {
            return Last::default();
        }
        let (warnings, warning_count) = self.warnings_after(st, res.warnings);
        match res.ended {
            Ended::Rows(n) => Last {
                row_count: Val::Known(-1),
                // An aggregate whose WHERE the optimizer finds impossible
                // sends its one row (or none, after HAVING) and leaves
                // FOUND_ROWS() as it was: with fewer than two rows the
                // value is n or the one before, and only the connection
                // knows which.
                found_rows: match st.kind == Kind::Select && !text.calc_found_rows && !text.skips {
                    true if n >= 2 || self.found_rows == Val::Known(n) => Val::Known(n),
                    // The connection's "as it was" need not be the
                    // session's: it may have run other sessions'
                    // statements, or this session's may have run
                    // elsewhere.
                    true => Val::Unsure,
                    false => Val::Connection,
                },
                warnings,
                warning_count,
            },
            Ended::Ok { affected } => Last {
                row_count: i64::try_from(affected).map_or(Val::Connection, Val::Known),
                found_rows: match st.kind {
                    Kind::Begin | Kind::Commit | Kind::Rollback | Kind::Savepoint => {
                        self.found_rows
                    }
                    // INSERT ... VALUES; an UPDATE or DELETE may set it
                    // (ORDER BY, a join, several tables), and one with a
                    // subquery reading a table does.
                    // As SET, DO, USE, LOCK TABLES and DDL that read no
                    // table (the session's settings change between reads).
                    Kind::Insert
                    | Kind::Replace
                    | Kind::Set
                    | Kind::Do
                    | Kind::Use
                    | Kind::Lock
                    | Kind::Unlock
                    | Kind::Ddl
                        if !selects =>
                    {
                        self.found_rows
                    }
                    _ => Val::Connection,
                },
                warnings,
                warning_count,
            },
            Ended::Nothing => Last::default(),
        }
    }

    /// After a SELECT of one row or none that [`Last::after`] found
    /// unsure of: with no FROM it reads no table, so no WHERE of its was
    /// found impossible and FOUND_ROWS() is the rows it sent (`SELECT 1`,
    /// `SELECT @@x`). Looked at only in that case, off the common path.
    pub fn without_table(
        self,
        st: &Statement,
        res: &RelayResult,
        scanned: Text,
        text: &[u8],
    ) -> Last {
        match (self.found_rows, res.ended) {
            (Val::Unsure, Ended::Rows(n))
                if n <= 1
                    && st.kind == Kind::Select
                    && !st.flags.contains(Flags::MULTI)
                    && res.results == 1
                    && !res.error
                    && !scanned.calc_found_rows
                    && !scanned.skips
                    && !has_word(text, b"from") =>
            {
                Last {
                    found_rows: Val::Known(n),
                    ..self
                }
            }
            _ => self,
        }
    }

    /// The conditions after a statement that succeeded with `reported`
    /// warnings of its own. MariaDB replaces the list with a statement's
    /// own conditions, clears it at a statement that uses a table, and
    /// keeps it otherwise (`SELECT 1`, `SET`, `SHOW WARNINGS`): sextant
    /// cannot tell from the answer which of the last two happened, except
    /// for statements that always name a table.
    /// A read of the session's functions (`SELECT @@warning_count`) is
    /// taken to use no table, as clients write it.
    fn warnings_after(self, st: &Statement, reported: u16) -> (Val<u16>, Option<u16>) {
        if reported > 0 {
            return (Val::Connection, Some(reported));
        }
        let uses_table = matches!(
            st.kind,
            Kind::Insert | Kind::Update | Kind::Delete | Kind::Replace | Kind::Load
        );
        let reads_session = st.kind == Kind::Select && st.flags.contains(Flags::SESSION_INFO);
        match self.warnings {
            Val::Known(0) => (Val::Known(0), Some(0)),
            _ if uses_table => (Val::Known(0), Some(0)),
            _ if reads_session => (self.warnings, self.warning_count),
            // The same connection still holds them (a released one would
            // be Gone): it knows whether they were cleared.
            Val::Connection => (Val::Connection, None),
            Val::Nowhere => (Val::Nowhere, None),
            Val::Known(_) | Val::Gone | Val::Unsure => (Val::Gone, None),
        }
    }

    /// After a statement over several groups: `rows` of a result set
    /// sextant merged, or an OK with `affected` rows. What each group's
    /// connection keeps describes its own part.
    pub fn spread(self, rows: Option<u64>, affected: u64) -> Last {
        Last {
            row_count: match rows {
                Some(_) => Val::Known(-1),
                None => i64::try_from(affected).map_or(Val::Nowhere, Val::Known),
            },
            found_rows: Val::Nowhere,
            warnings: Val::Nowhere,
            warning_count: None,
        }
    }

    /// A session that has run nothing yet: as a new server connection
    /// (MariaDB's ROW_COUNT() is 0 there; tests/deferred_begin.rs
    /// compares).
    pub fn fresh() -> Last {
        Last {
            row_count: Val::Known(0),
            found_rows: Val::Known(0),
            warnings: Val::Known(0),
            warning_count: Some(0),
        }
    }

    /// The session gave its connection back: what only it held is gone.
    /// (ROW_COUNT() is the connection's only after a CALL or several
    /// statements in one packet.)
    pub fn released(self) -> Last {
        Last {
            found_rows: match self.found_rows {
                Val::Connection => Val::Gone,
                v => v,
            },
            warnings: match self.warnings {
                Val::Connection => Val::Gone,
                v => v,
            },
            ..self
        }
    }

    /// The session's connection holds conditions a client may read next
    /// (SHOW WARNINGS): it keeps the connection for its next statement.
    pub fn holds_warnings(self) -> bool {
        self.warnings == Val::Connection && self.warning_count != Some(0)
    }

    /// Every value nowhere (to ask which functions read any of them).
    pub fn nowhere() -> Last {
        Last {
            row_count: Val::Nowhere,
            found_rows: Val::Nowhere,
            warnings: Val::Nowhere,
            warning_count: None,
        }
    }

    /// After a statement over several groups failed with a server's
    /// error: its condition is on some group's connection.
    pub fn spread_failed() -> Last {
        Last {
            row_count: Val::Known(-1),
            ..Last::nowhere()
        }
    }

    /// After an error sextant gave itself: the one condition is that error.
    pub fn refused(self) -> Last {
        Last {
            row_count: Val::Known(-1),
            found_rows: self.found_rows,
            warnings: Val::Known(1),
            warning_count: Some(1),
        }
    }

    /// After an OK sextant gave itself for transaction control (a held-back
    /// BEGIN, a savepoint kept for later): such statements use no table
    /// and leave FOUND_ROWS() and the warnings as they were.
    pub fn control(self) -> Last {
        Last {
            row_count: Val::Known(0),
            ..self
        }
    }
}

/// What a statement's text has in it, read as bytes (anywhere, strings
/// and comments too: a false yes only leaves FOUND_ROWS() to the
/// connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text {
    pub selects: bool,
    pub calc_found_rows: bool,
    /// A read that counts rows it did not send into FOUND_ROWS(): OFFSET
    /// or `LIMIT m, n`, or a set operation.
    pub skips: bool,
}

impl Text {
    /// Everything the text has, whatever the statement (for tests).
    #[cfg(test)]
    pub fn of(text: &[u8]) -> Text {
        let has = |w: &[u8]| text.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
        Text {
            selects: has_word(text, b"select"),
            calc_found_rows: has(b"sql_calc_found_rows"),
            skips: has_word(text, b"offset") || has_word(text, b"union") || limit_comma(text),
        }
    }

    /// What of `text` [`Last::after`] reads for statement `st`, scanning
    /// the text only where it matters (it is on every statement's path):
    /// a SELECT's text only when it names FOUND_ROWS in some form, an
    /// INSERT's for a SELECT in it.
    pub fn of_statement(st: &Statement, text: &[u8]) -> Text {
        let has = |w: &[u8]| text.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
        Text {
            selects: matches!(
                st.kind,
                Kind::Insert | Kind::Replace | Kind::Set | Kind::Do | Kind::Ddl
            ) && has_word(text, b"select"),
            calc_found_rows: st.flags.contains(Flags::FOUND_ROWS) && has(b"sql_calc_found_rows"),
            skips: st.flags.contains(Flags::UNSENT_ROWS)
                || (st.flags.contains(Flags::LIMIT) && limit_comma(text)),
        }
    }

    /// Unknown text: the worst case.
    pub const UNKNOWN: Text = Text {
        selects: true,
        calc_found_rows: true,
        skips: true,
    };
}

/// `LIMIT m, n`: a comma after the last LIMIT (one after a subquery's
/// LIMIT, in a select list, only costs sextant the value).
fn limit_comma(text: &[u8]) -> bool {
    let at = text
        .windows(5)
        .rposition(|x| x.eq_ignore_ascii_case(b"limit"));
    at.is_some_and(|at| text[at..].contains(&b','))
}

/// `w` as a word of its own (`sql_select_limit` has no SELECT in it),
/// anywhere: in a string or a comment too, where a false yes only costs
/// sextant a value it could have written in.
/// (The word's first letter is searched for, in either case, with
/// memchr: a point select's text is scanned for FROM after each one.)
pub(super) fn has_word(text: &[u8], w: &[u8]) -> bool {
    let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$';
    let Some(first) = w.first() else {
        return false;
    };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    memchr::memchr2_iter(lower, upper, text).any(|i| {
        text.get(i..i + w.len())
            .is_some_and(|x| x.eq_ignore_ascii_case(w))
            && (i == 0 || !ident(&text[i - 1]))
            && text.get(i + w.len()).is_none_or(|c| !ident(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_stand_on_their_own() {
        for (text, word, has) in [
            ("SELECT c FROM t", "from", true),
            ("select c from t", "from", true),
            ("from", "from", true),
            ("SELECT 1 FROM", "from", true),
            ("SELECT fromage, f_from, from_x, $from FROM2", "from", false),
            ("SELECT f, fr, fro", "from", false),
            ("SET @@sql_select_limit = 1", "select", false),
            ("INSERT INTO t SELECT 1", "select", true),
            ("", "from", false),
            ("x", "", false),
        ] {
            assert_eq!(
                has_word(text.as_bytes(), word.as_bytes()),
                has,
                "{text} {word}"
            );
        }
    }

    fn st(kind: Kind, flags: Flags) -> Statement {
        Statement {
            kind,
            flags,
            read_only: kind == Kind::Select,
        }
    }

    fn answered(ended: Ended, results: u32) -> RelayResult {
        RelayResult {
            ended,
            results,
            ..Default::default()
        }
    }

    #[test]
    fn values_as_the_server_keeps_them() {
        let before = Last {
            row_count: Val::Known(3),
            found_rows: Val::Known(7),
            warnings: Val::Known(2),
            warning_count: Some(2),
        };
        let select = st(Kind::Select, Flags::empty());
        let rows = answered(Ended::Rows(2), 1);
        assert_eq!(
            before.after(&select, Some(&rows), Text::of(b"")),
            Last {
                row_count: Val::Known(-1),
                found_rows: Val::Known(2),
                warnings: Val::Gone,
                warning_count: None,
            }
        );
        // SQL_CALC_FOUND_ROWS: the total is the server's.
        let calc = st(Kind::Select, Flags::FOUND_ROWS);
        let calc_text = Text::of(b"SELECT SQL_CALC_FOUND_ROWS a FROM t LIMIT 2");
        assert_eq!(
            before.after(&calc, Some(&rows), calc_text).found_rows,
            Val::Connection
        );
        let update = st(Kind::Update, Flags::empty());
        let ok = answered(Ended::Ok { affected: 4 }, 1);
        // An UPDATE leaves FOUND_ROWS() to the connection; an INSERT ...
        // VALUES keeps it, one with a SELECT in it may set it to its
        // subquery's rows.
        assert_eq!(
            before.after(&update, Some(&ok), Text::UNKNOWN),
            Last {
                row_count: Val::Known(4),
                found_rows: Val::Connection,
                warnings: Val::Known(0),
                warning_count: Some(0),
            }
        );
        assert_eq!(
            before.after(&update, Some(&ok), Text::of(b"")).found_rows,
            Val::Connection
        );
        let insert = st(Kind::Insert, Flags::empty());
        assert_eq!(
            before
                .after(&insert, Some(&ok), Text::of(b"INSERT INTO t VALUES (1)"))
                .found_rows,
            Val::Known(7)
        );
        assert_eq!(
            before
                .after(
                    &insert,
                    Some(&ok),
                    Text::of(b"INSERT INTO t SELECT * FROM u")
                )
                .found_rows,
            Val::Connection
        );
        // A setting changed between reads keeps it; one read from a
        // table sets it.
        let set = st(Kind::Set, Flags::empty());
        let set_ok = answered(Ended::Ok { affected: 0 }, 1);
        for (text, kept) in [
            (&b"SET SESSION sql_select_limit = 3"[..], true),
            (b"SET @x = 5 + (SELECT COUNT(*) FROM t)", false),
        ] {
            let after = before.after(&set, Some(&set_ok), Text::of_statement(&set, text));
            assert_eq!(after.found_rows == Val::Known(7), kept, "{text:?}");
        }
        assert!(Text::of(b"UPDATE t SET a = 1 WHERE b IN (Select c FROM u)").selects);
        assert!(!Text::of(b"UPDATE t SET a = 1 WHERE b = 2").selects);
        // FOUND_ROWS() itself is no SQL_CALC_FOUND_ROWS.
        // One row or none: n, or as it was (an impossible WHERE).
        let one = answered(Ended::Rows(1), 1);
        assert_eq!(
            before.after(&select, Some(&one), Text::of(b"")).found_rows,
            Val::Unsure
        );
        let tableless = before.after(&select, Some(&one), Text::of(b""));
        assert_eq!(
            tableless
                .without_table(&select, &one, Text::of(b"SELECT 1"), b"SELECT 1")
                .found_rows,
            Val::Known(1)
        );
        let agg = b"SELECT COUNT(*) FROM t WHERE 1 = 0";
        assert_eq!(
            tableless
                .without_table(&select, &one, Text::of(agg), agg)
                .found_rows,
            Val::Unsure
        );
        let was_one = Last {
            found_rows: Val::Known(1),
            ..before
        };
        assert_eq!(
            was_one.after(&select, Some(&one), Text::of(b"")).found_rows,
            Val::Known(1)
        );
        // Rows skipped by an offset, or a union's before its LIMIT, count.
        for text in [
            &b"SELECT a FROM t LIMIT 1 OFFSET 5"[..],
            b"SELECT a FROM t LIMIT 5, 1",
            b"SELECT a FROM t UNION ALL SELECT b FROM u LIMIT 3",
        ] {
            assert_eq!(
                before
                    .after(&select, Some(&rows), Text::of(text))
                    .found_rows,
                Val::Connection
            );
        }
        assert!(!Text::of(b"SELECT a, b FROM t LIMIT 5").skips);
        let found = Text::of(b"SELECT FOUND_ROWS() + 10");
        assert!(!found.calc_found_rows);
        assert_eq!(
            before.after(&calc, Some(&rows), found).found_rows,
            Val::Known(2)
        );
        let commit = st(Kind::Commit, Flags::empty());
        assert_eq!(
            before
                .after(
                    &commit,
                    Some(&answered(Ended::Ok { affected: 0 }, 1)),
                    Text::of(b"COMMIT")
                )
                .found_rows,
            Val::Known(7)
        );
        // An error: ROW_COUNT() -1, FOUND_ROWS() as it was.
        let mut err = answered(Ended::Nothing, 0);
        err.error = true;
        for res in [Some(&err), None] {
            assert_eq!(
                before.after(&update, res, Text::of(b"")),
                Last {
                    row_count: Val::Known(-1),
                    found_rows: Val::Known(7),
                    warnings: Val::Connection,
                    warning_count: None,
                }
            );
        }
        // CALL, several statements, several results: unknown.
        let call = st(Kind::Call, Flags::empty());
        assert_eq!(
            before.after(&call, Some(&ok), Text::of(b"")),
            Last::default()
        );
        let multi = st(Kind::Select, Flags::MULTI);
        assert_eq!(
            before.after(&multi, Some(&rows), Text::of(b"")),
            Last::default()
        );
        assert_eq!(
            before.after(&select, Some(&answered(Ended::Rows(2), 2)), Text::of(b"")),
            Last::default()
        );
        // Over several groups: no one connection holds them.
        let spread = before.spread(None, 9);
        assert_eq!(
            (spread.row_count, spread.found_rows),
            (Val::Known(9), Val::Nowhere)
        );
        // sextant's own error is the one condition; FOUND_ROWS() stays.
        let refused = spread.refused();
        assert_eq!(
            refused,
            Last {
                row_count: Val::Known(-1),
                found_rows: Val::Nowhere,
                warnings: Val::Known(1),
                warning_count: Some(1),
            }
        );
        assert_eq!(refused.control().warnings, Val::Known(1));
        // What only the connection held is gone with it.
        let held = before.after(&update, Some(&ok), Text::UNKNOWN);
        assert_eq!(held.released().found_rows, Val::Gone);
        assert_eq!(before.released(), before);
    }

    #[test]
    fn warnings_as_the_server_keeps_them() {
        let none = Last::fresh();
        let select = st(Kind::Select, Flags::empty());
        let update = st(Kind::Update, Flags::empty());
        let mut warned = answered(Ended::Rows(1), 1);
        warned.warnings = 3;
        let rows = answered(Ended::Rows(2), 1);
        let w = none.after(&select, Some(&warned), Text::UNKNOWN);
        // The statement's own conditions replace the list, on its connection.
        assert_eq!((w.warnings, w.warning_count), (Val::Connection, Some(3)));
        assert!(w.holds_warnings());
        // A statement with none of its own: cleared if it used a table,
        // kept if not; the connection knows which.
        let next = w.after(&select, Some(&rows), Text::UNKNOWN);
        assert_eq!((next.warnings, next.warning_count), (Val::Connection, None));
        // An UPDATE names a table: cleared.
        let ok = answered(Ended::Ok { affected: 1 }, 1);
        let cleared = w.after(&update, Some(&ok), Text::UNKNOWN);
        assert_eq!(
            (cleared.warnings, cleared.warning_count),
            (Val::Known(0), Some(0))
        );
        assert!(!cleared.holds_warnings());
        // None before, none of its own: none, whichever connection ran it.
        assert_eq!(
            none.after(&select, Some(&rows), Text::UNKNOWN).warnings,
            Val::Known(0)
        );
        // Released: the text went with the connection, the count is known.
        let gone = w.released();
        assert_eq!((gone.warnings, gone.warning_count), (Val::Gone, Some(3)));
        // A read of the count itself leaves them; another statement on
        // another connection may have cleared them or not.
        let reads = st(Kind::Select, Flags::SESSION_INFO);
        assert_eq!(
            gone.after(&reads, Some(&rows), Text::of(b"SELECT @@warning_count")),
            Last {
                row_count: Val::Known(-1),
                found_rows: Val::Known(2),
                ..gone
            }
        );
        let unsure = gone.after(&select, Some(&rows), Text::UNKNOWN);
        assert_eq!((unsure.warnings, unsure.warning_count), (Val::Gone, None));
        // sextant's own error, then a statement that may or may not clear it.
        let refused = none.refused();
        assert_eq!(
            refused.after(&select, Some(&rows), Text::UNKNOWN).warnings,
            Val::Gone
        );
        assert_eq!(
            refused.after(&update, Some(&ok), Text::UNKNOWN).warnings,
            Val::Known(0)
        );
    }
}
