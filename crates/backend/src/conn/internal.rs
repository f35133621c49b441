//! Statements sextant runs on a connection for itself (session set-up,
//! waits, lookups), and reading their answers.

use super::BackendConn;
use crate::error::BackendError;
use sextant_protocol::codec::{write_packet, Reader};
use sextant_protocol::consts::{cap, com};
use sextant_protocol::packets::{parse_err, parse_ok};
use sextant_protocol::tracker::{Expect, Packet, Tracker};

impl BackendConn {
    pub async fn exec_internal(&mut self, sql: &str) -> Result<(), BackendError> {
        self.send_internal(sql).await?;
        self.read_internal(sql).await
    }

    /// Sends a statement of sextant's own whose answer is one OK or ERR,
    /// without reading it: several may be sent before their answers are
    /// read ([`BackendConn::read_internal`], in order), one round trip
    /// for all.
    pub async fn send_internal(&mut self, sql: &str) -> Result<(), BackendError> {
        let mut p = Vec::with_capacity(sql.len() + 3);
        p.push(com::QUERY);
        if self.negotiated & cap::QUERY_ATTRIBUTES != 0 {
            // No attributes: a count of 0, one parameter set.
            p.extend_from_slice(&[0, 1]);
        }
        p.extend_from_slice(sql.as_bytes());
        self.send(0, &p).await
    }

    /// Sends a command whose answer is a single OK/EOF/ERR and applies the
    /// session state it reports.
    pub(super) async fn command_internal(
        &mut self,
        payload: &[u8],
        what: &str,
    ) -> Result<(), BackendError> {
        self.send(0, payload).await?;
        self.read_internal(what).await
    }

    /// Reads the answer to a statement [`BackendConn::send_internal`] sent
    /// (`what`, for its error), applying the session state it reports.
    pub async fn read_internal(&mut self, what: &str) -> Result<(), BackendError> {
        let (_, pkt) = self.read_packet().await?;
        match pkt.first() {
            Some(0x00) => {
                let ok = parse_ok(&pkt, true).map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
                self.status = ok.status;
                let block = ok.session_state.to_vec();
                self.apply_session_state(&block);
                Ok(())
            }
            Some(0xfe) => Ok(()),
            _ => Err(self.server_error(what, &pkt)),
        }
    }

    /// Runs a small query of sextant's own and returns its rows as text.
    pub async fn query_internal(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        Ok(self.query_named(sql).await?.1)
    }

    /// Like [`BackendConn::query_internal`], with the column names.
    #[allow(clippy::type_complexity)]
    pub async fn query_named(
        &mut self,
        sql: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), BackendError> {
        let mut out = Vec::with_capacity(sql.len() + 8);
        self.internal_query_packet(sql, &mut out);
        self.write_raw(&out).await?;
        self.read_named(sql).await
    }

    /// Appends a COM_QUERY packet of sextant's own statement `sql` to
    /// `out`, to be sent with other packets in one write (its answer is
    /// then read with [`BackendConn::read_named`] in its turn).
    pub fn internal_query_packet(&self, sql: &str, out: &mut Vec<u8>) {
        let mut p = Vec::with_capacity(sql.len() + 3);
        p.push(com::QUERY);
        if self.negotiated & cap::QUERY_ATTRIBUTES != 0 {
            // No attributes: a count of 0, one parameter set.
            p.extend_from_slice(&[0, 1]);
        }
        p.extend_from_slice(sql.as_bytes());
        write_packet(out, 0, &p);
    }

    /// Reads the answer to a query of sextant's own (`what`, for its
    /// error): its column names and rows as text.
    #[allow(clippy::type_complexity)]
    pub async fn read_named(
        &mut self,
        what: &str,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), BackendError> {
        let sql = what;
        let mut t = Tracker::new(Expect::Query, self.flavor.deprecate_eof())
            .with_metadata_flag(self.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
        let mut rows = Vec::new();
        let mut names = Vec::new();
        let mut cols = 0u64;
        let mut err = None;
        while !t.is_done() {
            let (_, pkt) = self.read_packet().await?;
            let in_rows = t.reading_rows();
            let kind = t
                .feed(pkt.len(), &pkt)
                .map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
            match kind {
                Packet::ColumnCount(n) => {
                    names.clear();
                    rows.clear();
                    cols = n;
                }
                Packet::Data if !in_rows => {
                    // Column definition: catalog, schema, table, org_table,
                    // name, ...
                    let mut r = Reader::new(&pkt);
                    let mut name = String::new();
                    for i in 0..5 {
                        if let Ok(v) = r.lenenc_bytes("column definition") {
                            if i == 4 {
                                name = String::from_utf8_lossy(v).into_owned();
                            }
                        }
                    }
                    names.push(name);
                }
                Packet::Data => {
                    let mut r = Reader::new(&pkt);
                    let mut row = Vec::new();
                    for _ in 0..cols {
                        if r.remaining() > 0 && pkt[pkt.len() - r.remaining()] == 0xfb {
                            r.u8("null").map_err(|source| BackendError::Protocol {
                                addr: self.addr.to_string(),
                                source,
                            })?;
                            row.push(None);
                        } else {
                            let v = r.lenenc_bytes("cell").map_err(|source| {
                                BackendError::Protocol {
                                    addr: self.addr.to_string(),
                                    source,
                                }
                            })?;
                            row.push(Some(String::from_utf8_lossy(v).into_owned()));
                        }
                    }
                    rows.push(row);
                }
                Packet::Err => err = Some(pkt),
                _ => {}
            }
        }
        if let Some(e) = err {
            return Err(self.server_error(sql, &e));
        }
        Ok((names, rows))
    }

    /// Reads and drops a whole answer to a command sent earlier (a read
    /// whose result may not reach the client), leaving the connection at
    /// the start of the next answer.
    pub async fn skip_answer(&mut self, expect: Expect) -> Result<(), BackendError> {
        let mut t = Tracker::new(expect, self.flavor.deprecate_eof())
            .with_metadata_flag(self.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
        while !t.is_done() {
            let (_, pkt) = self.read_packet().await?;
            t.feed(pkt.len(), &pkt)
                .map_err(|source| BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source,
                })?;
            if t.awaiting_infile() {
                // A read does not ask for a file; this connection's
                // exchange is not one sextant can finish.
                return Err(BackendError::Protocol {
                    addr: self.addr.to_string(),
                    source: sextant_protocol::ProtoError::Truncated(
                        "LOCAL INFILE in a skipped answer",
                    ),
                });
            }
        }
        self.status = t.status();
        Ok(())
    }

    /// The server's error packet `pkt`, answering `what`, as an error.
    pub fn server_error(&self, what: &str, pkt: &[u8]) -> BackendError {
        match parse_err(pkt) {
            Ok(e) => BackendError::Server {
                addr: self.addr.to_string(),
                what: what.to_string(),
                code: e.code,
                sql_state: String::from_utf8_lossy(&e.sql_state).into_owned(),
                message: String::from_utf8_lossy(e.message).into_owned(),
            },
            Err(source) => BackendError::Protocol {
                addr: self.addr.to_string(),
                source,
            },
        }
    }
}
