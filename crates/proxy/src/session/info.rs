//! Answers about the session itself: `SHOW [SESSION] STATUS | VARIABLES`
//! with the rows about the client's own connection, and the session
//! information sextant answers without a server.

use super::Session;
use crate::errors::SessionError;
use sextant_routing::Target;

/// Session status rows about the client's own connection, which the server
/// connection's rows would misdescribe.
const CLIENT_STATUS: &[&str] = &[
    "Compression",
    "Compression_algorithm",
    "Compression_level",
    "Ssl_cipher",
    "Ssl_cipher_list",
    "Ssl_default_timeout",
    "Ssl_server_not_after",
    "Ssl_server_not_before",
    "Ssl_verify_depth",
    "Ssl_verify_mode",
    "Ssl_version",
];

impl Session {
    /// `SHOW [SESSION] STATUS | VARIABLES ...`: the server's rows, with
    /// those about the connection itself (TLS, compression, timeouts,
    /// session tracking) describing the client's.
    /// `binary`: the answer to an execute of the statement prepared.
    pub(super) async fn session_show(
        &mut self,
        show: sextant_sql::session_info::SessionShow,
        target: Target,
        sql: &[u8],
        binary: bool,
    ) -> Result<(), SessionError> {
        use sextant_protocol::compress::Algorithm;
        use sextant_protocol::packets::{coltype, write_err, write_resultset, ResultsetFormat};
        if let Err(e) = self.attach(target).await {
            return self.reply_error(e).await;
        }
        let Some(a) = self.binding.direct_mut() else {
            return Ok(());
        };
        let rows = match a
            .conn_mut()
            .query_internal(&String::from_utf8_lossy(sql))
            .await
        {
            Ok(rows) => rows,
            Err(sextant_backend::BackendError::Server {
                code,
                sql_state,
                message,
                ..
            }) => {
                write_err(&mut self.client.out, 1, code, &sql_state, &message);
                self.after_statement();
                return self.client.flush().await;
            }
            Err(e) => {
                self.detach_discard();
                return self.reply_error(e.into()).await;
            }
        };
        let tls = self.client.stream.tls_info();
        let compression = self.client.compression();
        let tracking = self
            .client
            .tracking
            .as_deref()
            .unwrap_or(&a.conn().tracking_defaults)
            .clone();
        // A pooled connection's own wait_timeout is raised above the pool's
        // idle timeout; the client's session starts from the server's
        // default (interactive_timeout for an interactive client).
        let wait_default = match show {
            sextant_sql::session_info::SessionShow::Variables
                if !self.vars.client_side.contains_key("wait_timeout")
                    && rows.iter().any(|r| {
                        r.first().cloned().flatten().as_deref() == Some("wait_timeout")
                    }) =>
            {
                let q = match self.interactive {
                    true => "SELECT @@global.interactive_timeout",
                    false => "SELECT @@global.wait_timeout",
                };
                match a.conn_mut().query_internal(q).await {
                    Ok(r) => r.first().and_then(|r| r.first().cloned().flatten()),
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let client_side = &self.vars.client_side;
        let variable = |name: &str| -> Option<String> {
            let lower = name.to_ascii_lowercase();
            if let Some(which) = lower.strip_prefix("session_track_") {
                return tracking.value(which);
            }
            match client_side.get(lower.as_str()) {
                Some(v) => Some(v.to_string()),
                None if lower == "wait_timeout" => wait_default.clone(),
                None => None,
            }
        };
        let status = |name: &str| -> Option<String> {
            let on_tls = |v: &str| tls.as_ref().map_or(String::new(), |_| v.to_string());
            Some(match name {
                "Compression" => if compression.is_some() { "ON" } else { "OFF" }.into(),
                "Compression_algorithm" => match compression {
                    Some(Algorithm::Zlib) => "zlib".into(),
                    Some(Algorithm::Zstd(_)) => "zstd".into(),
                    None => String::new(),
                },
                "Compression_level" => match compression {
                    Some(Algorithm::Zstd(l)) => l.to_string(),
                    Some(Algorithm::Zlib) => "6".into(),
                    None => "0".into(),
                },
                "Ssl_cipher" => tls.as_ref().map_or(String::new(), |t| t.1.clone()),
                "Ssl_version" => tls.as_ref().map_or(String::new(), |t| t.0.to_string()),
                "Ssl_cipher_list" => match tls {
                    Some(_) => sextant_net::tls::offered_suites(),
                    None => String::new(),
                },
                // As MariaDB reports a TLS session of a client without a
                // certificate.
                "Ssl_default_timeout" => match tls {
                    Some(_) => "7200".into(),
                    None => "0".into(),
                },
                "Ssl_verify_depth" => match tls {
                    Some(_) => u64::MAX.to_string(),
                    None => "0".into(),
                },
                "Ssl_verify_mode" => match tls {
                    Some(_) => "5".into(),
                    None => "0".into(),
                },
                "Ssl_server_not_after" | "Ssl_server_not_before" => on_tls(""),
                _ => return None,
            })
        };
        use sextant_sql::session_info::{SessionShow, CLIENT_VARIABLES};
        let rows: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|mut row| {
                let name = row.first().cloned().flatten().unwrap_or_default();
                let value = match show {
                    SessionShow::Status
                        if CLIENT_STATUS.iter().any(|n| n.eq_ignore_ascii_case(&name)) =>
                    {
                        status(&name)
                    }
                    SessionShow::Variables
                        if CLIENT_VARIABLES
                            .iter()
                            .any(|n| n.eq_ignore_ascii_case(&name)) =>
                    {
                        variable(&name)
                    }
                    _ => None,
                };
                if let (Some(v), Some(cell)) = (value, row.get_mut(1)) {
                    *cell = Some(v);
                }
                row
            })
            .collect();
        self.after_statement();
        let format = ResultsetFormat {
            deprecate_eof: self.deprecate_eof,
            status_flags: self.status,
            extended_metadata: self.flavor.mariadb
                & sextant_protocol::consts::mariadb_cap::EXTENDED_METADATA
                != 0,
            binary,
        };
        write_resultset(
            &mut self.client.out,
            1,
            &[
                ("Variable_name", coltype::VAR_STRING),
                ("Value", coltype::VAR_STRING),
            ],
            &rows,
            format,
        );
        self.client.flush().await
    }

    /// The packet `p` (COM_QUERY or COM_STMT_PREPARE) with the client's own
    /// connection id, timeouts and session-tracking settings in place of
    /// what the server connection would answer; None if it asks nothing
    /// the server would answer differently.
    pub(super) fn answer_session_info(
        &self,
        p: &[u8],
        at: usize,
        prepare: bool,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        use super::last::Val;
        use sextant_sql::session_info::{rewrite, Subject};
        let mut gone = false;
        let mut warnings_gone = false;
        let mut unsure = false;
        let id = self.registered.as_ref().map(|r| r.id());
        // `IF(1, value, @@global.x)` has the column type the server gives
        // `@@x` (drivers map types: a BIGINT read as a string, say).
        let typed = |name: &str, v: &str| {
            let lit = match v {
                "ON" => "1".to_string(),
                "OFF" => "0".to_string(),
                _ if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => {
                    format!("CAST({v} AS UNSIGNED)")
                }
                _ => format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''")),
            };
            format!("IF(1, {lit}, @@global.{name})")
        };
        let sql = rewrite(&p[at..], self.lex_mode(), |s| match s {
            Subject::ConnectionId => id.map(|id| format!("CAST({id} AS UNSIGNED)")),
            // A prepared statement reads them when it runs, not now.
            Subject::RowCount if !prepare => self
                .last
                .row_count
                .known()
                .map(|n| format!("CAST({n} AS SIGNED)")),
            Subject::FoundRows if !prepare => match self.last.found_rows {
                Val::Known(n) => Some(format!("CAST({n} AS UNSIGNED)")),
                Val::Gone => {
                    gone = true;
                    None
                }
                Val::Unsure => {
                    unsure = true;
                    None
                }
                _ => None,
            },
            Subject::WarningCount if !prepare => {
                match (self.last.warnings, self.last.warning_count) {
                    (Val::Known(n), _) | (Val::Gone, Some(n)) => {
                        Some(format!("CAST({n} AS UNSIGNED)"))
                    }
                    (Val::Gone, None) => {
                        warnings_gone = true;
                        None
                    }
                    _ => None,
                }
            }
            Subject::RowCount | Subject::FoundRows | Subject::WarningCount => None,
            Subject::Variable(v) => match v.strip_prefix("session_track_") {
                Some(which) => match &self.client.tracking {
                    Some(t) => t.value(which).map(|value| typed(v, &value)),
                    // Server connections track more than the client asked
                    // for; what it has is the server's default.
                    None => Some(format!("@@global.{v}")),
                },
                None => match self.vars.client_side.get(v) {
                    Some(value) => Some(typed(v, value)),
                    // A pooled connection's own is raised above the pool's
                    // idle timeout; the client's session starts from the
                    // server's default (interactive_timeout for an
                    // interactive client).
                    None if v == "wait_timeout" && self.interactive => {
                        Some("@@global.interactive_timeout".into())
                    }
                    None if v == "wait_timeout" => Some("@@global.wait_timeout".into()),
                    None => None,
                },
            },
        });
        if gone {
            return Err(SessionError::FoundRowsGone);
        }
        if warnings_gone {
            return Err(SessionError::WarningsGone);
        }
        if unsure {
            return Err(SessionError::FoundRowsUnsure);
        }
        let Some(sql) = sql else { return Ok(None) };
        let mut out = Vec::with_capacity(sql.len() + 1);
        out.extend_from_slice(&p[..at]);
        out.extend_from_slice(&sql);
        Ok(Some(out))
    }
}
