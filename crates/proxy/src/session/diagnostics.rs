//! SHOW WARNINGS, SHOW ERRORS and their COUNT(*) forms where sextant
//! knows the conditions of the session's statement before: none, or an
//! error sextant gave itself. Sent to a pooled connection as written,
//! they would list whatever that connection's last statement left,
//! another session's perhaps.

use super::last::Val;
use super::{Session, SessionError};
use sextant_sql::session_info::Diagnostics;

impl Session {
    /// Answers `d` if sextant knows the conditions (None: the connection
    /// holding them answers).
    pub(super) async fn diagnostics(&mut self, d: Diagnostics) -> Option<Result<(), SessionError>> {
        use sextant_protocol::packets::{coltype, write_resultset};
        let conditions: Vec<(u16, String)> = match self.last.warnings {
            Val::Known(0) => Vec::new(),
            // Sextant's own error is the one condition.
            Val::Known(_) => self.refusal.iter().cloned().collect(),
            Val::Gone => match (d.count && !d.errors, self.last.warning_count) {
                (true, Some(n)) => return Some(self.count_answer(d, u64::from(n)).await),
                _ => return Some(self.reply_error(SessionError::WarningsGone).await),
            },
            Val::Connection | Val::Nowhere | Val::Unsure => return None,
        };
        if d.count {
            return Some(self.count_answer(d, conditions.len() as u64).await);
        }
        let rows: Vec<Vec<Option<String>>> = conditions
            .into_iter()
            .skip(usize::try_from(d.offset).unwrap_or(usize::MAX))
            .take(usize::try_from(d.limit).unwrap_or(usize::MAX))
            .map(|(code, msg)| vec![Some("Error".into()), Some(code.to_string()), Some(msg)])
            .collect();
        let format = self.local_format();
        write_resultset(
            &mut self.client.out,
            1,
            &[
                ("Level", coltype::VAR_STRING),
                ("Code", coltype::LONG),
                ("Message", coltype::VAR_STRING),
            ],
            &rows,
            format,
        );
        Some(self.diagnostics_sent().await)
    }

    async fn count_answer(&mut self, d: Diagnostics, n: u64) -> Result<(), SessionError> {
        use sextant_protocol::packets::{coltype, write_resultset};
        let name = match d.errors {
            true => "@@session.error_count",
            false => "@@session.warning_count",
        };
        let format = self.local_format();
        write_resultset(
            &mut self.client.out,
            1,
            &[(name, coltype::LONGLONG)],
            &[vec![Some(n.to_string())]],
            format,
        );
        self.diagnostics_sent().await
    }

    /// A diagnostic statement leaves the conditions and FOUND_ROWS() as
    /// they were; ROW_COUNT() is -1 after it, as after any result set.
    async fn diagnostics_sent(&mut self) -> Result<(), SessionError> {
        self.last.row_count = Val::Known(-1);
        self.after_statement();
        self.client.flush().await
    }

    fn local_format(&self) -> sextant_protocol::packets::ResultsetFormat {
        sextant_protocol::packets::ResultsetFormat {
            deprecate_eof: self.deprecate_eof,
            status_flags: self.status,
            extended_metadata: self.flavor.mariadb
                & sextant_protocol::consts::mariadb_cap::EXTENDED_METADATA
                != 0,
            binary: false,
        }
    }
}
