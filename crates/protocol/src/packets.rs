//! OK, ERR and EOF packets, session-state changes, and a small encoder for
//! text result sets (used for answers the proxy makes itself).

use crate::codec::{begin_packet, finish_packet, write_lenenc_bytes, write_lenenc_int, Reader};
use crate::consts::{status, track};
use crate::ProtoError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OkPacket<'a> {
    pub header: u8,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    pub info: &'a [u8],
    /// Raw session-state-change block (present only with CLIENT_SESSION_TRACK
    /// and SERVER_SESSION_STATE_CHANGED).
    pub session_state: &'a [u8],
}

/// Parses an OK packet (header 0x00, or 0xFE when it ends a result set under
/// CLIENT_DEPRECATE_EOF). `session_track` is whether the connection
/// negotiated CLIENT_SESSION_TRACK, which changes how `info` is encoded.
pub fn parse_ok(payload: &[u8], session_track: bool) -> Result<OkPacket<'_>, ProtoError> {
    let mut r = Reader::new(payload);
    let header = r.u8("OK header")?;
    if header != 0x00 && header != 0xfe {
        return Err(ProtoError::Malformed("OK packet header"));
    }
    let affected_rows = r.lenenc_int("affected rows")?;
    let last_insert_id = r.lenenc_int("last insert id")?;
    let status = r.u16("status flags")?;
    let warnings = r.u16("warnings")?;
    let mut info: &[u8] = &[];
    let mut session_state: &[u8] = &[];
    if session_track {
        if !r.is_empty() {
            info = r.lenenc_bytes("OK info")?;
        }
        if status & status::SESSION_STATE_CHANGED != 0 && !r.is_empty() {
            session_state = r.lenenc_bytes("session state")?;
        }
    } else if !r.is_empty() {
        // Documented as string<EOF>, but servers write it length-encoded
        // (net_send_ok stores it with net_store_data) and clients parse it
        // so; accept a plain rest-of-packet too.
        let rest = r.rest();
        let mut lr = Reader::new(rest);
        info = match lr.lenenc_bytes("OK info") {
            Ok(v) if lr.is_empty() => v,
            _ => rest,
        };
    }
    Ok(OkPacket {
        header,
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info,
        session_state,
    })
}

/// Encodes an OK payload (without frame header) for a peer that did or did
/// not negotiate CLIENT_SESSION_TRACK.
pub fn encode_ok_payload(out: &mut Vec<u8>, ok: &OkPacket<'_>, session_track: bool) {
    out.push(ok.header);
    write_lenenc_int(out, ok.affected_rows);
    write_lenenc_int(out, ok.last_insert_id);
    let mut st = ok.status;
    if !session_track {
        st &= !status::SESSION_STATE_CHANGED;
    }
    out.extend_from_slice(&st.to_le_bytes());
    out.extend_from_slice(&ok.warnings.to_le_bytes());
    if session_track {
        if !ok.info.is_empty() || st & status::SESSION_STATE_CHANGED != 0 {
            write_lenenc_bytes(out, ok.info);
        }
        if st & status::SESSION_STATE_CHANGED != 0 {
            write_lenenc_bytes(out, ok.session_state);
        }
    } else if !ok.info.is_empty() {
        // Length-encoded, as servers send it (see parse_ok).
        write_lenenc_bytes(out, ok.info);
    }
}

pub fn write_ok(out: &mut Vec<u8>, seq: u8, ok: &OkPacket<'_>, session_track: bool) {
    let at = begin_packet(out);
    encode_ok_payload(out, ok, session_track);
    finish_packet(out, at, seq);
}

/// A plain OK with the given status flags.
pub fn write_simple_ok(out: &mut Vec<u8>, seq: u8, status_flags: u16) {
    let ok = OkPacket {
        status: status_flags,
        ..Default::default()
    };
    write_ok(out, seq, &ok, false);
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket<'a> {
    pub code: u16,
    pub sql_state: [u8; 5],
    pub message: &'a [u8],
}

pub fn parse_err(payload: &[u8]) -> Result<ErrPacket<'_>, ProtoError> {
    let mut r = Reader::new(payload);
    if r.u8("ERR header")? != 0xff {
        return Err(ProtoError::Malformed("ERR packet header"));
    }
    let code = r.u16("error code")?;
    let mut sql_state = *b"HY000";
    if r.remaining() >= 6 && payload[3] == b'#' {
        r.u8("sql state marker")?;
        sql_state.copy_from_slice(r.bytes(5, "sql state")?);
    }
    Ok(ErrPacket {
        code,
        sql_state,
        message: r.rest(),
    })
}

pub fn write_err(out: &mut Vec<u8>, seq: u8, code: u16, sql_state: &str, message: &str) {
    let at = begin_packet(out);
    out.push(0xff);
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    let mut st = [b'H', b'Y', b'0', b'0', b'0'];
    for (d, s) in st.iter_mut().zip(sql_state.bytes()) {
        *d = s;
    }
    out.extend_from_slice(&st);
    // Keep well under one frame whatever the message.
    let msg = message.as_bytes();
    out.extend_from_slice(&msg[..msg.len().min(8000)]);
    finish_packet(out, at, seq);
}

/// Status flags of an EOF packet (header 0xFE, payload < 9 bytes).
pub fn parse_eof_status(payload: &[u8]) -> Result<u16, ProtoError> {
    let mut r = Reader::new(payload);
    if r.u8("EOF header")? != 0xfe {
        return Err(ProtoError::Malformed("EOF packet header"));
    }
    if r.is_empty() {
        // Pre-4.1 EOF: no flags.
        return Ok(0);
    }
    r.u16("EOF warnings")?;
    r.u16("EOF status")
}

pub fn write_eof(out: &mut Vec<u8>, seq: u8, status_flags: u16) {
    let at = begin_packet(out);
    out.push(0xfe);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&status_flags.to_le_bytes());
    finish_packet(out, at, seq);
}

/// One entry of an OK packet's session-state block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChange<'a> {
    SystemVariable {
        name: &'a [u8],
        value: &'a [u8],
    },
    Schema(&'a [u8]),
    /// The server says session state changed in a way it does not detail
    /// (user variables, temporary tables, prepared statements, ...).
    StateChanged(bool),
    Gtids(&'a [u8]),
    Other(u8),
}

pub fn session_changes(block: &[u8]) -> SessionChanges<'_> {
    SessionChanges {
        r: Reader::new(block),
    }
}

pub struct SessionChanges<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for SessionChanges<'a> {
    type Item = Result<StateChange<'a>, ProtoError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.r.is_empty() {
            return None;
        }
        Some(self.next_change())
    }
}

impl<'a> SessionChanges<'a> {
    fn next_change(&mut self) -> Result<StateChange<'a>, ProtoError> {
        let kind = self.r.u8("session state type")?;
        let data = self.r.lenenc_bytes("session state data")?;
        let mut d = Reader::new(data);
        Ok(match kind {
            track::SYSTEM_VARIABLES => {
                let name = d.lenenc_bytes("variable name")?;
                let value = d.lenenc_bytes("variable value")?;
                StateChange::SystemVariable { name, value }
            }
            track::SCHEMA => StateChange::Schema(d.lenenc_bytes("schema")?),
            // Servers send the flag as the bare byte '1' (the documented
            // nested length-encoded string is accepted too).
            track::STATE_CHANGE => StateChange::StateChanged(match data {
                [b] => *b == b'1',
                _ => d.lenenc_bytes("state")? == b"1",
            }),
            track::GTIDS => {
                d.u8("gtid encoding")?;
                StateChange::Gtids(d.lenenc_bytes("gtids")?)
            }
            other => StateChange::Other(other),
        })
    }
}

/// Copies to `out` the entries of a session-state block that `keep`
/// accepts, each as the server wrote it.
pub fn filter_session_state(
    block: &[u8],
    out: &mut Vec<u8>,
    mut keep: impl FnMut(&StateChange<'_>) -> bool,
) -> Result<(), ProtoError> {
    let mut it = session_changes(block);
    loop {
        let before = it.r.remaining();
        let Some(ch) = it.next() else { return Ok(()) };
        let ch = ch?;
        let start = block.len() - before;
        let end = block.len() - it.r.remaining();
        if keep(&ch) {
            out.extend_from_slice(&block[start..end]);
        }
    }
}

/// Length of one parameter value in the binary protocol, by its type.
fn binary_value_len(ty: u8, rest: &[u8]) -> Result<usize, ProtoError> {
    Ok(match ty {
        0x06 => 0,               // NULL
        0x01 => 1,               // TINY
        0x02 | 0x0d => 2,        // SHORT, YEAR
        0x03 | 0x09 | 0x04 => 4, // LONG, INT24, FLOAT
        0x05 | 0x08 => 8,        // DOUBLE, LONGLONG
        0x07 | 0x0a | 0x0b | 0x0c => {
            // TIMESTAMP, DATE, TIME, DATETIME: a length byte, then that much.
            1 + *rest
                .first()
                .ok_or(ProtoError::Truncated("temporal value"))? as usize
        }
        _ => {
            // Strings, decimals, blobs, JSON...: length-encoded.
            let mut r = Reader::new(rest);
            let n = r.lenenc_int("value length")? as usize;
            (rest.len() - r.remaining()) + n
        }
    })
}

/// Where the statement text of a COM_QUERY starts. With
/// CLIENT_QUERY_ATTRIBUTES the command byte is followed by a parameter
/// count, a parameter set count (1), and, when there are parameters, a
/// null bitmap, a bind flag, each one's type and name, and their values.
pub fn query_text_offset(payload: &[u8], query_attributes: bool) -> Result<usize, ProtoError> {
    if !query_attributes {
        return Ok(1);
    }
    let body = payload.get(1..).ok_or(ProtoError::Truncated("COM_QUERY"))?;
    let mut r = Reader::new(body);
    let count = r.lenenc_int("parameter count")? as usize;
    r.lenenc_int("parameter set count")?;
    if count > 0 {
        let bitmap = r.bytes(count.div_ceil(8), "null bitmap")?;
        let mut types = Vec::with_capacity(count);
        if r.u8("new params bind flag")? == 1 {
            for _ in 0..count {
                types.push(r.u16("parameter type")? as u8);
                r.lenenc_bytes("parameter name")?;
            }
        }
        for (i, ty) in types.iter().enumerate() {
            if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                continue;
            }
            let at = body.len() - r.remaining();
            let n = binary_value_len(*ty, &body[at..])?;
            r.bytes(n, "parameter value")?;
        }
    }
    Ok(1 + body.len() - r.remaining())
}

/// The fixed fields of a column definition (ColumnDefinition41) that say
/// what its values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMeta {
    pub charset: u16,
    pub length: u32,
    pub ty: u8,
    pub flags: u16,
    pub decimals: u8,
}

/// Reads a column definition's type fields (after its six names, and
/// MariaDB's extended metadata when present).
pub fn column_meta(def: &[u8]) -> Result<ColumnMeta, ProtoError> {
    let mut r = Reader::new(def);
    for what in [
        "catalog",
        "schema",
        "table",
        "org_table",
        "name",
        "org_name",
    ] {
        r.lenenc_bytes(what)?;
    }
    let rest = &def[def.len() - r.remaining()..];
    let fixed = match rest.first() {
        Some(0x0c) => &rest[1..],
        _ => {
            // MariaDB's extended metadata comes before the fixed fields.
            let mut r = Reader::new(rest);
            r.lenenc_bytes("extended metadata")?;
            let rest = &rest[rest.len() - r.remaining()..];
            rest.get(1..).unwrap_or_default()
        }
    };
    if fixed.len() < 10 {
        return Err(ProtoError::Truncated("column definition"));
    }
    Ok(ColumnMeta {
        charset: u16::from_le_bytes([fixed[0], fixed[1]]),
        length: u32::from_le_bytes([fixed[2], fixed[3], fixed[4], fixed[5]]),
        ty: fixed[6],
        flags: u16::from_le_bytes([fixed[7], fixed[8]]),
        decimals: fixed[9],
    })
}

/// Column types used by proxy-made result sets.
pub mod coltype {
    pub const LONG: u8 = 0x03;
    pub const LONGLONG: u8 = 0x08;
    pub const VAR_STRING: u8 = 0xfd;
}

/// Writes a whole text result set. `None` cells are SQL NULL.
pub fn write_text_resultset(
    out: &mut Vec<u8>,
    seq: u8,
    columns: &[(&str, u8)],
    rows: &[Vec<Option<String>>],
    deprecate_eof: bool,
    status_flags: u16,
) -> u8 {
    write_text_resultset_for(out, seq, columns, rows, deprecate_eof, status_flags, false)
}

/// [`write_text_resultset`] for a client that may have negotiated MariaDB's
/// extended metadata (each column definition then carries an empty block).
pub fn write_text_resultset_for(
    out: &mut Vec<u8>,
    seq: u8,
    columns: &[(&str, u8)],
    rows: &[Vec<Option<String>>],
    deprecate_eof: bool,
    status_flags: u16,
    extended_metadata: bool,
) -> u8 {
    let format = ResultsetFormat {
        deprecate_eof,
        status_flags,
        extended_metadata,
        binary: false,
    };
    write_resultset(out, seq, columns, rows, format)
}

/// How [`write_resultset`] writes a result set.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResultsetFormat {
    pub deprecate_eof: bool,
    pub status_flags: u16,
    /// MariaDB's extended metadata: an empty block in each definition.
    pub extended_metadata: bool,
    /// Rows in the binary protocol (the answer to COM_STMT_EXECUTE): a
    /// NULL bitmap, strings length-encoded, LONGLONG cells as 8-byte
    /// integers. Otherwise text rows.
    pub binary: bool,
}

/// Writes a whole result set of string (and LONGLONG) columns.
pub fn write_resultset(
    out: &mut Vec<u8>,
    mut seq: u8,
    columns: &[(&str, u8)],
    rows: &[Vec<Option<String>>],
    format: ResultsetFormat,
) -> u8 {
    let ResultsetFormat {
        deprecate_eof,
        status_flags,
        extended_metadata,
        binary,
    } = format;
    let at = begin_packet(out);
    write_lenenc_int(out, columns.len() as u64);
    finish_packet(out, at, seq);
    seq = seq.wrapping_add(1);
    for (name, ty) in columns {
        let at = begin_packet(out);
        write_lenenc_bytes(out, b"def");
        write_lenenc_bytes(out, b"");
        write_lenenc_bytes(out, b"");
        write_lenenc_bytes(out, b"");
        write_lenenc_bytes(out, name.as_bytes());
        write_lenenc_bytes(out, name.as_bytes());
        if extended_metadata {
            out.push(0);
        }
        out.push(0x0c);
        let (charset, len): (u16, u32) = if *ty == coltype::LONGLONG {
            (63, 20)
        } else {
            (45, 1024)
        };
        out.extend_from_slice(&charset.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.push(*ty);
        out.extend_from_slice(&0u16.to_le_bytes());
        out.push(0);
        out.extend_from_slice(&[0, 0]);
        finish_packet(out, at, seq);
        seq = seq.wrapping_add(1);
    }
    if !deprecate_eof {
        write_eof(out, seq, status_flags);
        seq = seq.wrapping_add(1);
    }
    for row in rows {
        let at = begin_packet(out);
        if binary {
            out.push(0);
            // The NULL bitmap's first two bits are reserved.
            let bitmap = out.len();
            out.resize(bitmap + (row.len() + 9) / 8, 0);
            for (i, cell) in row.iter().enumerate() {
                let ty = columns.get(i).map_or(coltype::VAR_STRING, |c| c.1);
                match cell {
                    None => out[bitmap + (i + 2) / 8] |= 1 << ((i + 2) % 8),
                    Some(v) if ty == coltype::LONGLONG => {
                        let n = v.parse::<i64>().unwrap_or_default();
                        out.extend_from_slice(&n.to_le_bytes());
                    }
                    Some(v) => write_lenenc_bytes(out, v.as_bytes()),
                }
            }
        } else {
            for cell in row {
                match cell {
                    Some(v) => write_lenenc_bytes(out, v.as_bytes()),
                    None => out.push(0xfb),
                }
            }
        }
        finish_packet(out, at, seq);
        seq = seq.wrapping_add(1);
    }
    if deprecate_eof {
        let ok = OkPacket {
            header: 0xfe,
            status: status_flags,
            ..Default::default()
        };
        write_ok(out, seq, &ok, false);
    } else {
        write_eof(out, seq, status_flags);
    }
    seq.wrapping_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::parse_header;

    #[test]
    fn query_attributes_before_the_text() {
        // No attributes: a count of 0 and a set count of 1.
        assert_eq!(query_text_offset(b"\x03\x00\x01SELECT 1", true).unwrap(), 3);
        assert_eq!(query_text_offset(b"\x03SELECT 1", false).unwrap(), 1);
        // Two attributes: a string "abc" named "trace", a LONGLONG named "n".
        let mut p = vec![0x03, 2, 1, 0b00, 1];
        p.extend_from_slice(&[0xfe, 0]);
        write_lenenc_bytes(&mut p, b"trace");
        p.extend_from_slice(&[0x08, 0]);
        write_lenenc_bytes(&mut p, b"n");
        write_lenenc_bytes(&mut p, b"abc");
        p.extend_from_slice(&7u64.to_le_bytes());
        let at = p.len();
        p.extend_from_slice(b"SELECT 1");
        assert_eq!(query_text_offset(&p, true).unwrap(), at);
        // The second one NULL: no value for it.
        let mut q = p[..at - 8].to_vec();
        q[3] = 0b10;
        let at = q.len();
        q.extend_from_slice(b"SELECT 2");
        assert_eq!(query_text_offset(&q, true).unwrap(), at);
        assert!(query_text_offset(&[0x03, 5, 1, 0], true).is_err());
    }

    #[test]
    fn ok_with_session_state() {
        // OK from MariaDB after `SET NAMES latin1` with session tracking on:
        // info empty, one system variable entry.
        let mut p = vec![0x00, 0x00, 0x00];
        p.extend_from_slice(&(status::AUTOCOMMIT | status::SESSION_STATE_CHANGED).to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.push(0); // empty info
        let mut entry = Vec::new();
        write_lenenc_bytes(&mut entry, b"character_set_client");
        write_lenenc_bytes(&mut entry, b"latin1");
        let mut block = vec![track::SYSTEM_VARIABLES];
        write_lenenc_bytes(&mut block, &entry);
        let mut schema = Vec::new();
        write_lenenc_bytes(&mut schema, b"db2");
        block.push(track::SCHEMA);
        write_lenenc_bytes(&mut block, &schema);
        write_lenenc_bytes(&mut p, &block);

        let ok = parse_ok(&p, true).unwrap();
        let changes: Vec<_> = session_changes(ok.session_state)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            changes,
            vec![
                StateChange::SystemVariable {
                    name: b"character_set_client",
                    value: b"latin1"
                },
                StateChange::Schema(b"db2"),
            ]
        );
        // Re-encoded for a client without session tracking: flag cleared,
        // state dropped, and it parses back as a plain OK.
        let mut out = Vec::new();
        encode_ok_payload(&mut out, &ok, false);
        let plain = parse_ok(&out, false).unwrap();
        assert_eq!(plain.status, status::AUTOCOMMIT);
        assert!(plain.info.is_empty());
        // Re-encoded for a tracking client: identical bytes.
        let mut same = Vec::new();
        encode_ok_payload(&mut same, &ok, true);
        assert_eq!(same, p);
    }

    #[test]
    fn ok_info_is_length_encoded_either_way() {
        // UPDATE's info string, as MariaDB and MySQL send it with and
        // without CLIENT_SESSION_TRACK: length-encoded.
        let mut p = vec![0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00];
        write_lenenc_bytes(&mut p, b"Rows matched: 1");
        let ok = parse_ok(&p, true).unwrap();
        assert_eq!(ok.info, b"Rows matched: 1");
        let mut out = Vec::new();
        encode_ok_payload(&mut out, &ok, false);
        assert_eq!(
            out, p,
            "re-encoded for a non-tracking client exactly as a server would"
        );
        assert_eq!(parse_ok(&out, false).unwrap().info, b"Rows matched: 1");
        // The documented plain form still parses.
        let mut plain = vec![0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00];
        plain.extend_from_slice(b"Rows matched: 1");
        assert_eq!(parse_ok(&plain, false).unwrap().info, b"Rows matched: 1");
    }

    #[test]
    fn state_change_as_mariadb_sends_it() {
        // SET @a = 1 on MariaDB 10.11: type 2, length 1, '1'.
        let block = [
            track::STATE_CHANGE,
            0x01,
            b'1',
            track::SCHEMA,
            0x04,
            0x03,
            b'd',
            b'b',
            b'1',
        ];
        let changes: Vec<_> = session_changes(&block).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            changes,
            vec![StateChange::StateChanged(true), StateChange::Schema(b"db1")]
        );
        let documented = [track::STATE_CHANGE, 0x02, 0x01, b'1'];
        assert_eq!(
            session_changes(&documented).next().unwrap().unwrap(),
            StateChange::StateChanged(true)
        );
    }

    #[test]
    fn err_round_trip() {
        let mut out = Vec::new();
        write_err(&mut out, 3, 1045, "28000", "Access denied");
        let h = parse_header(&out).unwrap();
        assert_eq!(h.seq, 3);
        let e = parse_err(&out[4..]).unwrap();
        assert_eq!(e.code, 1045);
        assert_eq!(&e.sql_state, b"28000");
        assert_eq!(e.message, b"Access denied");
    }

    #[test]
    fn truncated_packets_are_errors() {
        assert!(parse_ok(&[0x00, 0x01], true).is_err());
        assert!(parse_err(&[0xff, 0x01]).is_err());
        assert!(parse_eof_status(&[0xfe, 0, 0, 1]).is_err());
        let bad_block = [track::SYSTEM_VARIABLES, 10, 1];
        assert!(session_changes(&bad_block).next().unwrap().is_err());
    }
}
