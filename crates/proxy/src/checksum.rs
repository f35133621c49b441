//! A checksum of one answer as the client received it, so that a
//! transaction replayed on another server connection can be shown to
//! have answered the same (session/replay.rs). Rows, column definitions
//! and errors count byte for byte (headers included); OK and EOF packets
//! count by what the client reads in them (affected rows, insert id,
//! warnings, the info text and the transaction status flags), not by the
//! session-tracking block that names the server's own GTIDs, nor by
//! flags that say how the server ran it (no index used, slow).
//!
//! The relay feeds it while streaming (runs of rows in one call); the
//! replay reads packet by packet: the hash is of the byte stream, so both
//! give the same value for the same answer.

use sextant_backend::{BackendConn, BackendError};
use sextant_protocol::codec::{parse_header, HEADER_LEN};
use sextant_protocol::consts::{cap, status};
use sextant_protocol::packets::{parse_ok, OkPacket};
use sextant_protocol::tracker::{Expect, Packet, Tracker};
use std::hash::Hasher;
use twox_hash::xxhash3_64::{RawHasher, SecretBuffer};

/// The status flags a client acts on: in a transaction, autocommit, more
/// results, a read-only transaction.
const KEPT_STATUS: u16 =
    status::IN_TRANS | status::AUTOCOMMIT | status::MORE_RESULTS_EXISTS | status::IN_TRANS_READONLY;

/// XXH3 rather than XXH64: a read-write transaction's answers (ranges
/// of rows) are hashed as they pass, and XXH3's vector loop (AVX2 or
/// SSE2, chosen at run time) takes half of XXH64's instructions on them
/// (sysbench read-write under callgrind). The default secret is
/// borrowed, so a checksum allocates nothing.
pub struct Checksum(RawHasher<&'static [u8; 192]>);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(RawHasher::new(SecretBuffer::default()))
    }
}

impl Checksum {
    /// Packets counted byte for byte.
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.write(b);
    }

    pub fn ok(&mut self, ok: &OkPacket<'_>) {
        let mut fixed = [0u8; 21];
        fixed[0] = 0;
        fixed[1..9].copy_from_slice(&ok.affected_rows.to_le_bytes());
        fixed[9..17].copy_from_slice(&ok.last_insert_id.to_le_bytes());
        fixed[17..19].copy_from_slice(&(ok.status & KEPT_STATUS).to_le_bytes());
        fixed[19..21].copy_from_slice(&ok.warnings.to_le_bytes());
        self.0.write(&fixed);
        self.0.write(&(ok.info.len() as u32).to_le_bytes());
        self.0.write(ok.info);
    }

    pub fn eof(&mut self, warnings: u16, status: u16) {
        let mut fixed = [0u8; 5];
        fixed[0] = 0xfe;
        fixed[1..3].copy_from_slice(&warnings.to_le_bytes());
        fixed[3..5].copy_from_slice(&(status & KEPT_STATUS).to_le_bytes());
        self.0.write(&fixed);
    }

    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// Reads the answer to the command just sent on `conn` without relaying
/// it: its checksum (as the relay would have computed it), and the
/// connection's status after it. Session tracking it carries is applied
/// to the connection, as the relay applies it.
pub async fn read_answer(conn: &mut BackendConn, expect: Expect) -> Result<u64, BackendError> {
    read_answer_or_error(conn, expect).await.map(|(sum, _)| sum)
}

/// [`read_answer`], with the server's error when the answer was one.
pub async fn read_answer_or_error(
    conn: &mut BackendConn,
    expect: Expect,
) -> Result<(u64, Option<BackendError>), BackendError> {
    let mut error = None;
    let deprecate_eof = conn.flavor.deprecate_eof();
    let mut t = Tracker::new(expect, deprecate_eof)
        .with_metadata_flag(conn.negotiated & cap::OPTIONAL_RESULTSET_METADATA != 0);
    let mut sum = Checksum::default();
    let protocol = |conn: &BackendConn, source| BackendError::Protocol {
        addr: conn.addr.to_string(),
        source,
    };
    while !t.is_done() {
        while conn.unread().len() < HEADER_LEN {
            conn.fill().await?;
        }
        let Some(h) = parse_header(conn.unread()) else {
            return Err(BackendError::Closed {
                addr: conn.addr.to_string(),
            });
        };
        while conn.unread().len() < HEADER_LEN + h.len {
            conn.fill().await?;
        }
        let frame = &conn.unread()[..HEADER_LEN + h.len];
        let payload = &frame[HEADER_LEN..];
        let kind = t.feed(h.len, payload).map_err(|e| protocol(conn, e))?;
        match kind {
            Packet::Ok => {
                let ok = parse_ok(payload, true).map_err(|e| protocol(conn, e))?;
                sum.ok(&ok);
                let state = ok.session_state.to_vec();
                conn.status = ok.status;
                let n = HEADER_LEN + h.len;
                conn.consume(n);
                if !state.is_empty() {
                    conn.apply_session_state(&state);
                }
                continue;
            }
            Packet::Eof => {
                let w = match payload.len() >= 3 {
                    true => u16::from_le_bytes([payload[1], payload[2]]),
                    false => 0,
                };
                sum.eof(w, t.status());
            }
            Packet::LocalInfile => {
                return Err(protocol(
                    conn,
                    sextant_protocol::ProtoError::Truncated("LOCAL INFILE in a replayed answer"),
                ))
            }
            Packet::Err => {
                sum.bytes(frame);
                error = Some(conn.server_error("the statement", payload));
            }
            _ => sum.bytes(frame),
        }
        let n = HEADER_LEN + h.len;
        conn.consume(n);
    }
    // (An error leaves the connection's transaction state as it was.)
    if error.is_none() {
        conn.status = t.status();
    }
    Ok((sum.finish(), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_not_its_pieces_counts() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut whole = Checksum::default();
        whole.bytes(&data);
        let mut pieces = Checksum::default();
        for c in data.chunks(7) {
            pieces.bytes(c);
        }
        assert_eq!(whole.finish(), pieces.finish());
        let mut other = Checksum::default();
        other.bytes(&data[1..]);
        assert_ne!(whole.finish(), other.finish());
    }

    #[test]
    fn oks_count_what_the_client_reads() {
        let ok = |affected, id, st, info: &'static [u8], state: &'static [u8]| OkPacket {
            header: 0,
            affected_rows: affected,
            last_insert_id: id,
            status: st,
            warnings: 0,
            info,
            session_state: state,
        };
        let sum = |o: OkPacket<'_>| {
            let mut c = Checksum::default();
            c.ok(&o);
            c.finish()
        };
        let base = sum(ok(1, 7, status::IN_TRANS, b"", b""));
        // Another server's GTID in the tracking block, or a slow flag:
        // the same answer.
        assert_eq!(
            base,
            sum(ok(
                1,
                7,
                status::IN_TRANS | status::SESSION_STATE_CHANGED | 0x0800,
                b"",
                b"\x03\x05\x00\x03abc"
            ))
        );
        assert_ne!(base, sum(ok(2, 7, status::IN_TRANS, b"", b"")));
        assert_ne!(base, sum(ok(1, 8, status::IN_TRANS, b"", b"")));
        assert_ne!(base, sum(ok(1, 7, 0, b"", b"")));
        assert_ne!(
            base,
            sum(ok(1, 7, status::IN_TRANS, b"Rows matched: 1", b""))
        );
    }
}
