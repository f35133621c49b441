//! A `SET` that gives session variables the values the session already
//! has, answered by sextant: drivers and frameworks send `SET autocommit
//! = 1`, `SET time_zone = '+00:00'` or `SET sql_mode = '...'` at every
//! connection checkout, and each costs a round trip that changes nothing.
//!
//! Only where the answer is exactly the server's: variables whose SET has
//! no effect but the value and raises no warning when the value is the
//! same (listed below; not the character sets, whose SET resets the
//! collation, nor deprecated names, which warn every time), literals
//! compared as the server reported the value, a session the variables of
//! which sextant knows exactly (no transaction, nothing pinned to a
//! connection, whose state sextant may not know), and a client whose
//! session tracking would not be told of the SET (the server reports a
//! tracked variable at every SET of it).

use super::query::Next;
use super::Session;
use crate::errors::SessionError;
use crate::relay::{Ended, RelayResult};
use sextant_protocol::consts::status;
use sextant_protocol::packets::StateChange;
use sextant_routing::Statement;
use sextant_sql::set_literals::{literal_assignments, Literal};
use sextant_sql::{Classification, Flags};

/// How a variable's value is written, for comparing a literal with it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// ON / OFF (given as 1, 0, TRUE, FALSE, ON, OFF or 'ON', 'OFF').
    Bool,
    /// Decimal digits (given as digits).
    Number,
    /// A string (given as a quoted string, byte for byte).
    Text,
}

/// The variables answered here, and the form of their values. Others are
/// sent to the server whatever their value.
const KNOWN: &[(&str, Form)] = &[
    ("sql_mode", Form::Text),
    ("time_zone", Form::Text),
    ("transaction_isolation", Form::Text),
    ("wait_timeout", Form::Number),
    ("interactive_timeout", Form::Number),
    ("net_read_timeout", Form::Number),
    ("net_write_timeout", Form::Number),
    ("sql_select_limit", Form::Number),
    ("group_concat_max_len", Form::Number),
    ("innodb_lock_wait_timeout", Form::Number),
    ("lock_wait_timeout", Form::Number),
    ("div_precision_increment", Form::Number),
    ("max_execution_time", Form::Number),
    ("foreign_key_checks", Form::Bool),
    ("unique_checks", Form::Bool),
    ("sql_auto_is_null", Form::Bool),
    ("sql_safe_updates", Form::Bool),
    ("sql_big_selects", Form::Bool),
    ("sql_notes", Form::Bool),
    ("sql_warnings", Form::Bool),
    ("sql_quote_show_create", Form::Bool),
];

impl Session {
    /// A SET that changes nothing answered with the server's OK; None: it
    /// runs as usual.
    pub(super) async fn known_set(
        &mut self,
        c: &Classification<'_>,
        sql: &[u8],
    ) -> Option<Result<Next, SessionError>> {
        if self.sharding.is_some()
            || c.flags
                .intersects(Flags::MULTI | Flags::USER_VAR | Flags::TRACKING | Flags::NEXT_TRX)
            || self.pinned()
            || self.pending_begin.is_some()
            || self.status & status::IN_TRANS != 0
        {
            return None;
        }
        let (assigned, n) = literal_assignments(sql, self.lex_mode())?;
        let tracking = match self.session_track {
            false => None,
            // The server's defaults are the connection's to say.
            true => Some(self.client.tracking.as_deref()?),
        };
        for a in &assigned[..n] {
            let mut buf = [0u8; 64];
            let name = buf.get_mut(..a.name.len())?;
            name.copy_from_slice(a.name);
            name.make_ascii_lowercase();
            let name: &[u8] = name;
            if tracking.is_some_and(|t| {
                t.state_change || t.shows(&StateChange::SystemVariable { name, value: b"" })
            }) {
                return None;
            }
            let same = match name {
                b"autocommit" => {
                    let on = self.status & status::AUTOCOMMIT != 0;
                    bool_literal(a.value) == Some(on)
                }
                _ => {
                    let (_, form) = KNOWN.iter().find(|(k, _)| k.as_bytes() == name)?;
                    let vars = &self.vars;
                    let known = std::str::from_utf8(name)
                        .ok()
                        .and_then(|k| vars.vars.get(k).or_else(|| vars.client_side.get(k)))?;
                    same_value(*form, name, a.value, known.as_bytes())
                }
            };
            if !same {
                return None;
            }
        }
        Some(self.known_set_ok(c, sql).await.map(|()| Next::Done))
    }

    async fn known_set_ok(
        &mut self,
        c: &Classification<'_>,
        sql: &[u8],
    ) -> Result<(), SessionError> {
        let st = Statement::of(c);
        let res = RelayResult {
            ended: Ended::Ok { affected: 0 },
            results: 1,
            ..Default::default()
        };
        self.last = self
            .last
            .after(&st, Some(&res), super::last::Text::of_statement(&st, sql));
        self.local_ok().await
    }
}

/// A literal as ON (true) or OFF (false), if it is one.
fn bool_literal(v: Literal<'_>) -> Option<bool> {
    match v {
        Literal::Digits(b"1") => Some(true),
        Literal::Digits(b"0") => Some(false),
        Literal::Word(w) | Literal::Str(w)
            if w.eq_ignore_ascii_case(b"on") || (w.eq_ignore_ascii_case(b"true") && !is_str(v)) =>
        {
            Some(true)
        }
        Literal::Word(w) | Literal::Str(w)
            if w.eq_ignore_ascii_case(b"off")
                || (w.eq_ignore_ascii_case(b"false") && !is_str(v)) =>
        {
            Some(false)
        }
        _ => None,
    }
}

fn is_str(v: Literal<'_>) -> bool {
    matches!(v, Literal::Str(_))
}

/// Whether `value`, given to variable `name` of `form`, is the value the
/// server reported for it (`known`).
fn same_value(form: Form, name: &[u8], value: Literal<'_>, known: &[u8]) -> bool {
    match (form, value) {
        (Form::Bool, v) => match known {
            b"ON" => bool_literal(v) == Some(true),
            b"OFF" => bool_literal(v) == Some(false),
            _ => false,
        },
        (Form::Number, Literal::Digits(d)) => d == known,
        (Form::Text, Literal::Str(s)) => s == known && !(name == b"sql_mode" && mysql_warns(s)),
        _ => false,
    }
}

/// MySQL 8 warns at every SET of an sql_mode with NO_ZERO_DATE,
/// NO_ZERO_IN_DATE or ERROR_FOR_DIVISION_BY_ZERO without a strict mode.
fn mysql_warns(mode: &[u8]) -> bool {
    let has = |m: &[u8]| mode.split(|&c| c == b',').any(|x| x == m);
    (has(b"NO_ZERO_DATE") || has(b"NO_ZERO_IN_DATE") || has(b"ERROR_FOR_DIVISION_BY_ZERO"))
        && !(has(b"STRICT_TRANS_TABLES") || has(b"STRICT_ALL_TABLES"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_match_the_reported_value_only_in_the_variables_form() {
        let cases: &[(Form, &str, Literal<'_>, &str, bool)] = &[
            (Form::Bool, "x", Literal::Digits(b"1"), "ON", true),
            (Form::Bool, "x", Literal::Word(b"true"), "ON", true),
            (Form::Bool, "x", Literal::Str(b"on"), "ON", true),
            (Form::Bool, "x", Literal::Str(b"true"), "ON", false),
            (Form::Bool, "x", Literal::Digits(b"1"), "OFF", false),
            (Form::Bool, "x", Literal::Word(b"OFF"), "OFF", true),
            (Form::Bool, "x", Literal::Digits(b"2"), "ON", false),
            (Form::Number, "x", Literal::Digits(b"600"), "600", true),
            (Form::Number, "x", Literal::Digits(b"0600"), "600", false),
            (Form::Number, "x", Literal::Str(b"600"), "600", false),
            (
                Form::Text,
                "time_zone",
                Literal::Str(b"+00:00"),
                "+00:00",
                true,
            ),
            (
                Form::Text,
                "time_zone",
                Literal::Str(b"+0:00"),
                "+00:00",
                false,
            ),
            (Form::Text, "sql_mode", Literal::Str(b"ansi"), "ANSI", false),
            (
                Form::Text,
                "sql_mode",
                Literal::Str(b"STRICT_TRANS_TABLES,NO_ZERO_DATE"),
                "STRICT_TRANS_TABLES,NO_ZERO_DATE",
                true,
            ),
            (
                Form::Text,
                "sql_mode",
                Literal::Str(b"NO_ZERO_DATE"),
                "NO_ZERO_DATE",
                false,
            ),
            (Form::Text, "x", Literal::Digits(b"1"), "1", false),
        ];
        for (form, name, v, known, want) in cases {
            assert_eq!(
                same_value(*form, name.as_bytes(), *v, known.as_bytes()),
                *want,
                "{name} = {v:?} with {known}"
            );
        }
    }
}
