//! Streams one server response to the client without decoding rows:
//! packets that go out as the server sent them are sent in runs, straight
//! from the connection's read buffer. Only control packets (OK, ERR, EOF,
//! column counts, prepare headers) are looked at; OK packets are
//! re-encoded for clients that did not negotiate session tracking (the
//! servers always report it to sextant). Memory is bounded by one read: what is read from the server is
//! written to the client before the next read, so a slow client slows the
//! server down instead of filling sextant's memory.

use crate::client::Client;
use sextant_backend::BackendConn;
use sextant_protocol::codec::{parse_header, HEADER_LEN};
use sextant_protocol::consts::{cap, status};
use sextant_protocol::packets::{
    filter_session_state, parse_ok, session_changes, write_ok, OkPacket, StateChange,
};
use sextant_protocol::tracker::{Expect, Packet, Tracker};
use sextant_protocol::ProtoError;
use tokio::io::AsyncReadExt;

/// Frames up to this size reach the client only whole, so that if the server
/// fails mid-response the client stream is at a packet boundary and can be
/// sent a clean error. Larger frames stream in pieces to bound memory.
const WHOLE_FRAME_MAX: usize = 256 * 1024;

/// Client buffers above this size are given back after a response (a
/// proxy may hold thousands of sessions).
const IDLE_BUFFER_MAX: usize = 32 * 1024;
const IDLE_BUFFER: usize = 8 * 1024;
/// A server connection's read buffer grows to this much when a response
/// needs more than it has, and keeps it: the pool holds few connections,
/// and giving it back after every response larger than a few rows cost a
/// reallocation and a copy per range read.
const SERVER_BUFFER: usize = 64 * 1024;
const SERVER_BUFFER_MAX: usize = 2 * SERVER_BUFFER;

pub struct RelayOpts<'a> {
    pub session_track: bool,
    /// Where a write's GTID is published the moment its OK is read,
    /// before the client hears of it (read_your_writes, scope user).
    pub writes: Option<&'a sextant_backend::gtid::Newest>,
    pub deprecate_eof: bool,
    /// For COM_STMT_PREPARE: the id the client will know the statement by.
    pub client_stmt_id: Option<u32>,
    /// A write that may go to another server if this one turned read-only:
    /// an answer that is only the server's read-only error is held back
    /// (`read_only_rejected`) instead of relayed.
    pub hold_read_only_error: bool,
    /// A prepare that may be retried once sextant has closed statements it
    /// keeps: an answer that is only the server's 1461 (too many prepared
    /// statements) is held back (`stmt_limit_rejected`).
    pub hold_stmt_limit_error: bool,
    /// Checksum the answer (`RelayResult::checksum`): a statement of a
    /// transaction that may be replayed.
    pub checksum: bool,
    /// An answer that is only an error after which the server closes the
    /// connection (the connection was killed) is held back
    /// (`ending_held`): the transaction it ended may be replayed.
    pub hold_connection_ending: bool,
}

#[derive(Debug, Default)]
pub struct RelayResult {
    pub status: u16,
    pub error: bool,
    /// The session's variables or schema changed.
    pub vars_changed: bool,
    /// (server id, columns, params) of a prepared statement.
    pub prepared: Option<(u32, u16, u16)>,
    /// The last non-zero last_insert_id an OK packet carried.
    pub last_insert_id: u64,
    /// Rows the answer carried, plus the rows its OKs say were affected
    /// (for query digests).
    pub rows: u64,
    /// The server said the connection is ending (killed, shutting down):
    /// it must not go back to the pool.
    pub connection_ending: bool,
    /// The server refused the statement because it is read-only, before
    /// running anything, and the error was not relayed
    /// (`hold_read_only_error`).
    pub read_only_rejected: bool,
    /// The server refused a prepare with 1461 and the error was not
    /// relayed (`hold_stmt_limit_error`).
    pub stmt_limit_rejected: bool,
    /// What the server's session tracking said the statement did, taken
    /// from the connection by the session once the answer is relayed.
    pub tracked: Tracked,
    /// A result set ended with an EOF packet (a connection without
    /// CLIENT_DEPRECATE_EOF), which carries no session state: the GTID of
    /// a write answered by rows (INSERT ... RETURNING) is not in it.
    pub eof_ended: bool,
    /// How the answer's last result ended, and how many results it had
    /// (for ROW_COUNT() and FOUND_ROWS(), which sextant answers itself).
    pub ended: Ended,
    pub results: u32,
    /// The warnings the answer's last OK or EOF reported: that
    /// statement's own (0 may also mean it left the ones before it).
    pub warnings: u16,
    /// Rows of the result set being relayed.
    pub(crate) set_rows: u64,
    /// The answer's checksum (`crate::checksum`), when asked for.
    pub checksum: Option<u64>,
    /// The answer was only a connection-ending error, not relayed
    /// (`hold_connection_ending`).
    pub ending_held: bool,
}

/// How an answer's last result ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    #[default]
    Nothing,
    /// An OK packet of its own (not ending rows): the rows it affected.
    Ok { affected: u64 },
    /// A result set: its rows.
    Rows(u64),
}

/// What session tracking reported about a statement, beyond the answer.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tracked {
    /// The connection holds state sextant cannot replay.
    pub opaque: bool,
    /// The `insert_id` variable was set.
    pub insert_id_reported: bool,
    /// `SET LAST_INSERT_ID = N`.
    pub last_insert_id_set: Option<u64>,
    /// The GTID of the write.
    pub wrote: Option<sextant_backend::gtid::Gtid>,
}

/// The server refuses writes because it is read-only: the statement did
/// not run.
fn read_only_error(code: u16, message: &[u8]) -> bool {
    match code {
        1836 => true, // ER_READ_ONLY_MODE
        // ER_OPTION_PREVENTS_STATEMENT names the option: --read-only or
        // --super-read-only (and others, which are not this).
        1290 => {
            message
                .windows(9)
                .any(|w| w.eq_ignore_ascii_case(b"read-only"))
                || message
                    .windows(9)
                    .any(|w| w.eq_ignore_ascii_case(b"read_only"))
        }
        _ => false,
    }
}

/// An OK whose session-state block the server wrote for sextant (which
/// tracks everything): the client is sent the entries its own settings ask
/// for, and the status flag only if any remain, as the server would have.
fn show_tracked(client: &mut Client, be: &BackendConn, seq: u8, ok: OkPacket<'_>) {
    let mut tracking = client
        .tracking
        .take()
        .unwrap_or_else(|| Box::new(be.tracking_defaults.clone()));
    // A statement that changes the settings is reported under the new ones.
    for (name, value) in client.pending_tracking.drain(..) {
        tracking.set(name.as_bytes(), &value);
    }
    for ch in session_changes(ok.session_state).flatten() {
        if let StateChange::SystemVariable { name, value } = ch {
            tracking.set(name, value);
        }
    }
    let mut kept = std::mem::take(&mut client.scratch);
    kept.clear();
    if filter_session_state(ok.session_state, &mut kept, |c| tracking.shows(c)).is_err() {
        kept.clear();
    }
    let mut shown = ok;
    shown.session_state = &kept;
    if kept.is_empty() {
        shown.status &= !status::SESSION_STATE_CHANGED;
    }
    write_ok(&mut client.out, seq, &shown, true);
    client.scratch = kept;
    client.tracking = Some(tracking);
}

/// Errors after which the server closes the connection.
const CONNECTION_ENDING_ERRORS: &[u16] = &[
    1053, // ER_SERVER_SHUTDOWN
    1152, // ER_ABORTING_CONNECTION
    1927, // ER_CONNECTION_KILLED (MariaDB)
    4031, // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
];

#[derive(Debug)]
pub enum RelayError {
    /// Writing to (or reading LOCAL INFILE data from) the client failed.
    Client(std::io::Error),
    ClientClosed,
    /// The server connection failed or sent something unreadable.
    Server {
        reason: String,
        /// Some bytes of the response already reached the client.
        started: bool,
        /// The client stream stopped inside a packet: it cannot be told
        /// anything more and must be closed.
        mid_packet: bool,
        /// Sequence id for an error packet that follows what was sent.
        next_seq: u8,
    },
}

pub async fn relay(
    client: &mut Client,
    be: &mut BackendConn,
    expect: Expect,
    opts: &RelayOpts<'_>,
) -> Result<RelayResult, RelayError> {
    let mut t = Tracker::new(expect, opts.deprecate_eof)
        .with_metadata_flag(be.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
    // An error packet carries no status flags: the server's state is what
    // it was (still in its transaction, still in autocommit mode). Starting
    // from zero made an error look like "no transaction, autocommit off":
    // the session left an open transaction, and the pool took back a
    // connection in the middle of one.
    let mut res = RelayResult {
        status: be.status,
        ..Default::default()
    };
    let mut body_left = 0usize;
    let mut sum = opts.checksum.then(crate::checksum::Checksum::default);
    let mut next_seq = 1u8;
    let mut sent_any = false;
    client.out.clear();
    let server_err =
        |reason: String, sent_any: bool, body_left: usize, next_seq: u8| RelayError::Server {
            reason,
            started: sent_any,
            mid_packet: body_left > 0,
            next_seq,
        };
    loop {
        let mut pos = be.rpos;
        // Packets relayed as the server sent them are not copied one by
        // one: `run` is where such bytes start in `rbuf` (up to `pos`), and
        // they are copied out only before a packet sextant rewrites, or
        // sent straight from `rbuf` when nothing else is to be sent.
        let mut run: Option<usize> = None;
        loop {
            let avail = be.rbuf.len() - pos;
            if body_left > 0 {
                if avail == 0 {
                    break;
                }
                let n = body_left.min(avail);
                if let Some(c) = sum.as_mut() {
                    c.bytes(&be.rbuf[pos..pos + n]);
                }
                run.get_or_insert(pos);
                pos += n;
                body_left -= n;
                continue;
            }
            if t.is_done() || avail < HEADER_LEN {
                break;
            }
            // Rows as they come: relayed in runs, without a step each.
            let (n, rows, seq) = t.whole_rows(&be.rbuf[pos..]);
            if n > 0 {
                if let Some(c) = sum.as_mut() {
                    c.bytes(&be.rbuf[pos..pos + n]);
                }
                run.get_or_insert(pos);
                pos += n;
                res.rows += rows;
                res.set_rows += rows;
                next_seq = seq.wrapping_add(1);
                continue;
            }
            let Some(h) = parse_header(&be.rbuf[pos..]) else {
                break;
            };
            if h.len > 0 && avail == HEADER_LEN {
                break;
            }
            // A frame already whole in the buffer is read whole (a row
            // then takes one step, not two).
            let whole = avail >= HEADER_LEN + h.len;
            let full = h.len == 0 || whole || t.needs_full(h.len, be.rbuf[pos + HEADER_LEN]);
            if !full && h.len <= WHOLE_FRAME_MAX {
                break;
            }
            let row = t.reading_rows();
            if !full {
                let proto = |e: ProtoError| e.to_string();
                let kind = t
                    .feed(h.len, &be.rbuf[pos + HEADER_LEN..pos + HEADER_LEN + 1])
                    .map_err(|e| server_err(proto(e), sent_any, body_left, next_seq))?;
                res.rows += (row && kind == Packet::Data) as u64;
                res.set_rows += (row && kind == Packet::Data) as u64;
                if let Some(c) = sum.as_mut() {
                    c.bytes(&be.rbuf[pos..pos + HEADER_LEN]);
                }
                run.get_or_insert(pos);
                pos += HEADER_LEN;
                body_left = h.len;
                next_seq = h.seq.wrapping_add(1);
                continue;
            }
            if !whole {
                break;
            }
            let start = pos;
            let end = pos + HEADER_LEN + h.len;
            let payload = &be.rbuf[start + HEADER_LEN..end];
            let kind = t
                .feed(h.len, payload)
                .map_err(|e| server_err(e.to_string(), sent_any, 0, next_seq))?;
            next_seq = h.seq.wrapping_add(1);
            res.rows += (row && kind == Packet::Data) as u64;
            res.set_rows += (row && kind == Packet::Data) as u64;
            if let Some(c) = sum.as_mut() {
                match kind {
                    Packet::Ok => {
                        if let Ok(ok) = parse_ok(payload, true) {
                            c.ok(&ok);
                        }
                    }
                    Packet::Eof => {
                        let w = match h.len >= 3 {
                            true => u16::from_le_bytes([payload[1], payload[2]]),
                            false => 0,
                        };
                        c.eof(w, t.status());
                    }
                    _ => c.bytes(&be.rbuf[start..end]),
                }
            }
            // Whether the packet goes to the client as the server sent it.
            let mut as_is = true;
            match kind {
                Packet::Ok => {
                    let ok = parse_ok(payload, true)
                        .map_err(|e| server_err(e.to_string(), sent_any, 0, next_seq))?;
                    res.status = ok.status;
                    res.warnings = ok.warnings;
                    res.rows += ok.affected_rows;
                    res.results += 1;
                    res.ended = match row {
                        true => Ended::Rows(std::mem::take(&mut res.set_rows)),
                        false => Ended::Ok {
                            affected: ok.affected_rows,
                        },
                    };
                    if ok.last_insert_id != 0 {
                        res.last_insert_id = ok.last_insert_id;
                    }
                    if !ok.session_state.is_empty() {
                        res.vars_changed |= sextant_backend::apply_session_state(
                            &mut be.vars,
                            &mut be.track,
                            ok.session_state,
                        );
                        if let (Some(w), Some(g)) = (opts.writes, &be.track.last_gtid) {
                            w.publish(g);
                        }
                    }
                    if !opts.session_track || ok.status & status::SESSION_STATE_CHANGED != 0 {
                        as_is = false;
                        take_run(&mut client.out, &be.rbuf, &mut run, start);
                        if !opts.session_track {
                            write_ok(&mut client.out, h.seq, &ok, false);
                        } else {
                            show_tracked(client, be, h.seq, ok);
                        }
                    }
                }
                Packet::Eof => {
                    res.status = t.status();
                    if h.len >= 3 {
                        res.warnings = u16::from_le_bytes([payload[1], payload[2]]);
                    }
                    res.eof_ended = true;
                    if row {
                        res.results += 1;
                        res.ended = Ended::Rows(std::mem::take(&mut res.set_rows));
                    }
                    // An EOF cannot say what changed; the flag alone is
                    // for clients that asked to hear of any change.
                    let told = opts.session_track
                        && client.tracking.as_ref().is_some_and(|t| t.state_change);
                    if res.status & status::SESSION_STATE_CHANGED != 0 && !told && h.len >= 5 {
                        as_is = false;
                        take_run(&mut client.out, &be.rbuf, &mut run, start);
                        let at = client.out.len();
                        client.out.extend_from_slice(&be.rbuf[start..end]);
                        let st = (res.status & !status::SESSION_STATE_CHANGED).to_le_bytes();
                        client.out[at + HEADER_LEN + 3..at + HEADER_LEN + 5].copy_from_slice(&st);
                    }
                }
                Packet::Err => {
                    res.error = true;
                    // Only when it is the whole answer: nothing ran.
                    let whole_answer = !sent_any && run.is_none() && client.out.is_empty();
                    if let Ok(e) = sextant_protocol::packets::parse_err(payload) {
                        let ending = CONNECTION_ENDING_ERRORS.contains(&e.code);
                        res.connection_ending |= ending;
                        if opts.hold_connection_ending && whole_answer && ending {
                            as_is = false;
                            res.ending_held = true;
                        } else if opts.hold_stmt_limit_error
                            && whole_answer
                            && e.code == crate::errors::ER_MAX_PREPARED_STMT_COUNT_REACHED
                        {
                            as_is = false;
                            res.stmt_limit_rejected = true;
                        } else if opts.hold_read_only_error
                            && whole_answer
                            && read_only_error(e.code, e.message)
                        {
                            as_is = false;
                            res.read_only_rejected = true;
                        }
                    }
                }
                Packet::PrepareOk {
                    stmt_id,
                    columns,
                    params,
                } => {
                    res.prepared = Some((stmt_id, columns, params));
                    if let Some(id) = opts.client_stmt_id {
                        as_is = false;
                        take_run(&mut client.out, &be.rbuf, &mut run, start);
                        let at = client.out.len();
                        client.out.extend_from_slice(&be.rbuf[start..end]);
                        client.out[at + HEADER_LEN + 1..at + HEADER_LEN + 5]
                            .copy_from_slice(&id.to_le_bytes());
                    }
                }
                Packet::LocalInfile => {
                    take_run(&mut client.out, &be.rbuf, &mut run, start);
                    client.out.extend_from_slice(&be.rbuf[start..end]);
                    be.consume(end - be.rpos);
                    pos = be.rpos;
                    flush(client).await?;
                    sent_any = true;
                    Box::pin(send_infile(client, be)).await?;
                    t.infile_sent();
                    continue;
                }
                _ => {}
            }
            if as_is {
                run.get_or_insert(start);
            }
            pos = end;
        }
        match run {
            // Nothing rewritten: sent from where it was read.
            Some(from) if client.out.is_empty() => {
                client
                    .send_bytes(&be.rbuf[from..pos])
                    .await
                    .map_err(RelayError::Client)?;
                sent_any = true;
            }
            _ => take_run(&mut client.out, &be.rbuf, &mut run, pos),
        }
        be.consume(pos - be.rpos);
        if !client.out.is_empty() {
            flush(client).await?;
            sent_any = true;
        }
        if t.is_done() && body_left == 0 {
            be.status = res.status;
            res.checksum = sum.map(|c| c.finish());
            // A large result grew the buffers; idle connections and
            // sessions should not keep that memory (thousands of them).
            if be.unread().is_empty() && be.rbuf.capacity() > SERVER_BUFFER_MAX {
                be.rbuf = Vec::with_capacity(IDLE_BUFFER);
            }
            if client.out.capacity() > IDLE_BUFFER_MAX {
                client.out = Vec::with_capacity(IDLE_BUFFER);
            }
            return Ok(res);
        }
        be.make_room(8192, SERVER_BUFFER);
        match be.stream.read_buf(&mut be.rbuf).await {
            Ok(0) => {
                return Err(server_err(
                    "the server closed the connection".into(),
                    sent_any || t.started(),
                    body_left,
                    next_seq,
                ))
            }
            Ok(_) => {}
            Err(e) => {
                return Err(server_err(
                    e.to_string(),
                    sent_any || t.started(),
                    body_left,
                    next_seq,
                ))
            }
        }
    }
}

/// Copies the pending run of packets relayed as they are (`rbuf[from..upto]`)
/// to `out`, before anything rewritten follows them.
#[inline]
fn take_run(out: &mut Vec<u8>, rbuf: &[u8], run: &mut Option<usize>, upto: usize) {
    if let Some(from) = run.take() {
        out.extend_from_slice(&rbuf[from..upto]);
    }
}

async fn flush(client: &mut Client) -> Result<(), RelayError> {
    client.send_out().await.map_err(RelayError::Client)?;
    client.out.clear();
    Ok(())
}

/// Reads more of a LOCAL INFILE file, within the client's net_read_timeout
/// (past it the server would give up on a file that stopped arriving).
async fn fill_infile(client: &mut Client) -> Result<(), crate::errors::SessionError> {
    match client.read_timeout {
        None => client.fill().await,
        Some(limit) => tokio::time::timeout(limit, client.fill())
            .await
            .unwrap_or(Err(crate::errors::SessionError::ClientClosed)),
    }
}

/// LOAD DATA LOCAL INFILE: copies the client's file packets to the server
/// until the empty packet that ends them, streaming, never holding a whole
/// packet.
async fn send_infile(client: &mut Client, be: &mut BackendConn) -> Result<(), RelayError> {
    let client_err = |e: crate::errors::SessionError| match e {
        crate::errors::SessionError::ClientIo(io) => RelayError::Client(io),
        _ => RelayError::ClientClosed,
    };
    let server_err = |e: std::io::Error| RelayError::Server {
        reason: e.to_string(),
        started: true,
        mid_packet: false,
        next_seq: 0,
    };
    loop {
        while client.rbuf.len() < HEADER_LEN {
            fill_infile(client).await.map_err(client_err)?;
        }
        let Some(h) = parse_header(&client.rbuf) else {
            continue;
        };
        be.stream
            .send(&client.rbuf[..HEADER_LEN])
            .await
            .map_err(server_err)?;
        client.rbuf.drain(..HEADER_LEN);
        let mut left = h.len;
        while left > 0 {
            if client.rbuf.is_empty() {
                fill_infile(client).await.map_err(client_err)?;
            }
            let n = left.min(client.rbuf.len());
            be.stream
                .send(&client.rbuf[..n])
                .await
                .map_err(server_err)?;
            client.rbuf.drain(..n);
            left -= n;
        }
        if h.len == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read_only_error;

    #[test]
    fn read_only_errors_are_recognised() {
        assert!(read_only_error(
            1290,
            b"The MariaDB server is running with the --read-only option so it cannot execute this statement"
        ));
        assert!(read_only_error(
            1290,
            b"The MySQL server is running with the --super-read-only option so it cannot execute this statement"
        ));
        assert!(!read_only_error(
            1290,
            b"The MariaDB server is running with the --secure-file-priv option so it cannot execute this statement"
        ));
        assert!(read_only_error(1836, b"Running in read-only mode"));
        assert!(!read_only_error(1062, b"Duplicate entry"));
    }
}
