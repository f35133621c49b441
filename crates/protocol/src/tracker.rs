//! Follows a server's response to one command frame by frame, so that the
//! proxy can stream it to the client without decoding rows and still know
//! where it ends, whether more results follow, and the final status flags.
//!
//! The relay asks [`Tracker::needs_full`] with each frame's length and first
//! byte: only the small packets that carry control information (OK, ERR, EOF,
//! column counts, prepare headers) have to be complete in the buffer; rows
//! and column definitions stream through in whatever pieces arrive.

use crate::codec::{Reader, HEADER_LEN as HEADER, MAX_PAYLOAD};
use crate::consts::status;
use crate::ProtoError;

/// What kind of response the command that was sent produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// COM_QUERY: OK, ERR, LOCAL INFILE request, or result sets.
    Query,
    /// COM_STMT_EXECUTE: OK, ERR, or binary result sets (or an open cursor).
    Execute,
    /// COM_STMT_FETCH: rows and a terminator, or ERR.
    Fetch,
    /// COM_FIELD_LIST: column definitions and a terminator, or ERR.
    FieldList,
    /// COM_STMT_PREPARE: prepare-OK and definitions, or ERR.
    Prepare,
    /// One packet: COM_PING, COM_INIT_DB, COM_STATISTICS, COM_SET_OPTION, ...
    Single,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    ColumnDefs(u64),
    ColumnsEof,
    Rows,
    FieldDefs,
    PrepareParams(u16),
    PrepareParamsEof,
    PrepareCols(u16),
    PrepareColsEof,
    Infile,
    Done,
}

/// What a packet was, as far as the proxy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    /// Row, column definition, or any payload relayed as is.
    Data,
    /// A continuation frame of a packet of 16 MiB or more.
    Continuation,
    ColumnCount(u64),
    /// An OK packet (header 0x00, or 0xFE ending a result set under
    /// CLIENT_DEPRECATE_EOF). The relay parses it for status and session
    /// state and may re-encode it.
    Ok,
    Eof,
    Err,
    PrepareOk {
        stmt_id: u32,
        columns: u16,
        params: u16,
    },
    /// The server asks the client for a local file (LOAD DATA LOCAL).
    LocalInfile,
    /// MariaDB's progress report (an ERR-shaped packet with code 0xFFFF,
    /// sent to clients with MARIADB_CLIENT_PROGRESS): the answer goes on.
    Progress,
}

#[derive(Debug, Clone)]
pub struct Tracker {
    expect: Expect,
    state: State,
    deprecate_eof: bool,
    continuation: bool,
    status: u16,
    /// Set once any packet of the response has been seen.
    started: bool,
    /// (columns, params) of a prepare response being read.
    prepare_counts: (u16, u16),
    /// CLIENT_OPTIONAL_RESULTSET_METADATA: a byte after the column count
    /// says whether column definitions follow.
    metadata_flag: bool,
}

impl Tracker {
    pub fn new(expect: Expect, deprecate_eof: bool) -> Self {
        let state = match expect {
            Expect::Fetch => State::Rows,
            Expect::FieldList => State::FieldDefs,
            _ => State::Start,
        };
        Tracker {
            expect,
            state,
            deprecate_eof,
            continuation: false,
            status: 0,
            started: false,
            prepare_counts: (0, 0),
            metadata_flag: false,
        }
    }

    /// For a connection with CLIENT_OPTIONAL_RESULTSET_METADATA.
    pub fn with_metadata_flag(mut self, on: bool) -> Self {
        self.metadata_flag = on;
        self
    }

    /// Whether the next packet, if it is not a terminator, is a row.
    pub fn reading_rows(&self) -> bool {
        self.state == State::Rows
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether any part of the response has arrived.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Status flags of the last OK/EOF seen (the final one once done).
    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn awaiting_infile(&self) -> bool {
        self.state == State::Infile
    }

    /// After the client has sent the file (or an empty packet), the server
    /// answers with OK or ERR, and possibly more results.
    pub fn infile_sent(&mut self) {
        if self.state == State::Infile {
            self.state = State::Start;
        }
    }

    /// Among a result's rows: the run of whole row frames at the start of
    /// `buf`, taken as [`Tracker::feed`] would take them one by one
    /// (rows: nothing to look at but each frame's first byte). Returns
    /// the run's length in bytes, how many rows it holds and the last
    /// frame's sequence id; it stops before a terminator, an error, a
    /// frame not whole in `buf` and a frame of 16 MiB (whose rest follows
    /// in more frames).
    pub fn whole_rows(&mut self, buf: &[u8]) -> (usize, u64, u8) {
        let (mut at, mut rows, mut seq) = (0usize, 0u64, 0u8);
        if self.state != State::Rows || self.continuation {
            return (0, 0, 0);
        }
        // One bounds check per frame (a header and a first byte): this loop
        // runs once per row relayed.
        while let Some(h) = buf.get(at..at + HEADER + 1) {
            let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
            let first = h[HEADER];
            if len == 0
                || len >= MAX_PAYLOAD
                || first == 0xff
                || first == 0xfe
                || buf.len() - at < HEADER + len
            {
                break;
            }
            seq = h[3];
            at += HEADER + len;
            rows += 1;
        }
        if rows > 0 {
            self.started = true;
        }
        (at, rows, seq)
    }

    /// Whether the frame with this length and first payload byte must be
    /// complete in the buffer before [`Tracker::feed`] is called.
    #[inline]
    pub fn needs_full(&self, len: usize, first: u8) -> bool {
        if self.continuation {
            return false;
        }
        match self.state {
            State::ColumnDefs(_) | State::PrepareParams(_) | State::PrepareCols(_) => false,
            State::Rows | State::FieldDefs => is_terminator(len, first) || first == 0xff,
            _ => true,
        }
    }

    /// Feeds one frame. `payload` is the whole payload when
    /// [`Tracker::needs_full`] said so, otherwise at least its first byte.
    pub fn feed(&mut self, len: usize, payload: &[u8]) -> Result<Packet, ProtoError> {
        self.started = true;
        if self.continuation {
            self.continuation = len == MAX_PAYLOAD;
            return Ok(Packet::Continuation);
        }
        self.continuation = len == MAX_PAYLOAD;
        let first = *payload
            .first()
            .ok_or(ProtoError::Truncated("packet header"))?;
        match self.state {
            State::Start => self.start(len, first, payload),
            State::ColumnDefs(n) => {
                self.state = if n > 1 {
                    State::ColumnDefs(n - 1)
                } else if self.deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
                Ok(Packet::Data)
            }
            State::ColumnsEof => {
                if first == 0xff {
                    self.state = State::Done;
                    return Ok(Packet::Err);
                }
                if first != 0xfe {
                    return Err(ProtoError::Unexpected {
                        state: "expecting EOF after column definitions",
                        byte: first,
                    });
                }
                self.status = crate::packets::parse_eof_status(payload)?;
                // An execute that opened a cursor sends no rows now; they
                // come with COM_STMT_FETCH.
                self.state =
                    if self.expect == Expect::Execute && self.status & status::CURSOR_EXISTS != 0 {
                        State::Done
                    } else {
                        State::Rows
                    };
                Ok(Packet::Eof)
            }
            State::Rows | State::FieldDefs => {
                if first == 0xff {
                    self.state = State::Done;
                    return Ok(Packet::Err);
                }
                if !is_terminator(len, first) {
                    return Ok(Packet::Data);
                }
                let kind = if self.deprecate_eof {
                    self.status = ok_status(payload)?;
                    Packet::Ok
                } else {
                    self.status = crate::packets::parse_eof_status(payload)?;
                    Packet::Eof
                };
                self.state = if self.state == State::Rows
                    && self.expect != Expect::Fetch
                    && self.status & status::MORE_RESULTS_EXISTS != 0
                {
                    State::Start
                } else {
                    State::Done
                };
                Ok(kind)
            }
            State::PrepareParams(n) => {
                self.state = if n > 1 {
                    State::PrepareParams(n - 1)
                } else if !self.deprecate_eof {
                    State::PrepareParamsEof
                } else {
                    self.after_params()
                };
                Ok(Packet::Data)
            }
            State::PrepareParamsEof => {
                self.expect_eof(first, payload)?;
                self.state = self.after_params();
                Ok(Packet::Eof)
            }
            State::PrepareCols(n) => {
                self.state = if n > 1 {
                    State::PrepareCols(n - 1)
                } else if !self.deprecate_eof {
                    State::PrepareColsEof
                } else {
                    State::Done
                };
                Ok(Packet::Data)
            }
            State::PrepareColsEof => {
                self.expect_eof(first, payload)?;
                self.state = State::Done;
                Ok(Packet::Eof)
            }
            State::Infile => Err(ProtoError::Unexpected {
                state: "waiting for the client's LOCAL INFILE data",
                byte: first,
            }),
            State::Done => Err(ProtoError::Unexpected {
                state: "no response pending",
                byte: first,
            }),
        }
    }

    fn start(&mut self, len: usize, first: u8, payload: &[u8]) -> Result<Packet, ProtoError> {
        match (self.expect, first) {
            (_, 0xff) if payload.get(1..3) == Some(&[0xff, 0xff]) => Ok(Packet::Progress),
            (_, 0xff) => {
                self.state = State::Done;
                Ok(Packet::Err)
            }
            (Expect::Single, 0x00) => {
                self.status = ok_status(payload)?;
                self.state = State::Done;
                Ok(Packet::Ok)
            }
            (Expect::Single, 0xfe) if len < 9 => {
                self.status = crate::packets::parse_eof_status(payload)?;
                self.state = State::Done;
                Ok(Packet::Eof)
            }
            (Expect::Single, _) => {
                // COM_STATISTICS answers with a bare string.
                self.state = State::Done;
                Ok(Packet::Data)
            }
            (Expect::Query | Expect::Execute, 0x00) => {
                self.status = ok_status(payload)?;
                self.state = if self.status & status::MORE_RESULTS_EXISTS != 0 {
                    State::Start
                } else {
                    State::Done
                };
                Ok(Packet::Ok)
            }
            // A LOAD DATA LOCAL prepared and executed asks for the file too.
            (Expect::Query | Expect::Execute, 0xfb) => {
                self.state = State::Infile;
                Ok(Packet::LocalInfile)
            }
            (Expect::Query | Expect::Execute, _) => {
                let mut r = Reader::new(payload);
                let n = r.lenenc_int("column count")?;
                if n == 0 {
                    return Err(ProtoError::Malformed("column count of zero"));
                }
                // RESULTSET_METADATA_NONE: no definitions, the rest as usual.
                let skipped = self.metadata_flag && r.u8("metadata follows")? == 0;
                self.state = match (skipped, self.deprecate_eof) {
                    (false, _) => State::ColumnDefs(n),
                    (true, true) => State::Rows,
                    (true, false) => State::ColumnsEof,
                };
                Ok(Packet::ColumnCount(n))
            }
            (Expect::Prepare, 0x00) => {
                let mut r = Reader::new(payload);
                r.u8("prepare header")?;
                let stmt_id = r.u32("statement id")?;
                let columns = r.u16("column count")?;
                let params = r.u16("parameter count")?;
                // After a filler and the warning count, MySQL 8's
                // metadata_follows: without metadata no definitions come.
                let skipped = self.metadata_flag
                    && r.bytes(3, "warnings").is_ok()
                    && r.u8("metadata follows").is_ok_and(|m| m == 0);
                self.prepare_counts = match skipped {
                    true => (0, 0),
                    false => (columns, params),
                };
                self.state = self.after_prepare_ok();
                Ok(Packet::PrepareOk {
                    stmt_id,
                    columns,
                    params,
                })
            }
            (_, b) => Err(ProtoError::Unexpected {
                state: "reading the first packet of a response",
                byte: b,
            }),
        }
    }

    fn after_prepare_ok(&self) -> State {
        match self.prepare_counts {
            (_, p) if p > 0 => State::PrepareParams(p),
            (c, _) if c > 0 => State::PrepareCols(c),
            _ => State::Done,
        }
    }

    fn after_params(&self) -> State {
        match self.prepare_counts.0 {
            0 => State::Done,
            c => State::PrepareCols(c),
        }
    }

    fn expect_eof(&mut self, first: u8, payload: &[u8]) -> Result<(), ProtoError> {
        if first != 0xfe {
            return Err(ProtoError::Unexpected {
                state: "expecting EOF after prepared statement definitions",
                byte: first,
            });
        }
        self.status = crate::packets::parse_eof_status(payload)?;
        Ok(())
    }
}

/// An OK/EOF that ends rows: header 0xFE and shorter than a maximal frame
/// (a text row can start with 0xFE only as the prefix of a >= 16 MiB string).
#[inline]
fn is_terminator(len: usize, first: u8) -> bool {
    first == 0xfe && len < MAX_PAYLOAD
}

/// Status flags of an OK packet without decoding the rest of it.
fn ok_status(payload: &[u8]) -> Result<u16, ProtoError> {
    let mut r = Reader::new(payload);
    r.u8("OK header")?;
    r.lenenc_int("affected rows")?;
    r.lenenc_int("last insert id")?;
    r.u16("status flags")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_metadata() {
        // MySQL 8 with resultset_metadata = NONE: the count, a 0, then
        // (without DEPRECATE_EOF) the EOF that ends metadata, then rows.
        for deprecate in [false, true] {
            let mut t = Tracker::new(Expect::Query, deprecate).with_metadata_flag(true);
            assert_eq!(t.feed(2, &[1, 0]).unwrap(), Packet::ColumnCount(1));
            if !deprecate {
                assert_eq!(t.feed(5, &[0xfe, 0, 0, 2, 0]).unwrap(), Packet::Eof);
            }
            assert!(t.reading_rows());
            assert_eq!(t.feed(2, &[1, b'1']).unwrap(), Packet::Data);
            let end: &[u8] = if deprecate {
                &[0xfe, 0, 0, 2, 0, 0, 0]
            } else {
                &[0xfe, 0, 0, 2, 0]
            };
            t.feed(end.len(), end).unwrap();
            assert!(t.is_done());
            // FULL: definitions follow as usual.
            let mut t = Tracker::new(Expect::Query, deprecate).with_metadata_flag(true);
            t.feed(2, &[1, 1]).unwrap();
            assert!(!t.reading_rows());
            assert_eq!(t.feed(30, b"\x03def").unwrap(), Packet::Data);
        }
    }

    #[test]
    fn progress_reports_do_not_end_the_answer() {
        let mut t = Tracker::new(Expect::Query, true);
        // stage 1 of 2, 45.000%, "copy to tmp table"
        let mut progress = vec![0xff, 0xff, 0xff, 1, 1, 2, 0xc8, 0xaf, 0x00, 17];
        progress.extend_from_slice(b"copy to tmp table");
        assert_eq!(t.feed(progress.len(), &progress).unwrap(), Packet::Progress);
        assert!(!t.is_done());
        let ok = [0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00];
        assert_eq!(t.feed(ok.len(), &ok).unwrap(), Packet::Ok);
        assert!(t.is_done());
    }
    use crate::codec::write_lenenc_int;

    fn ok(st: u16) -> Vec<u8> {
        let mut v = vec![0x00, 0, 0];
        v.extend_from_slice(&st.to_le_bytes());
        v.extend_from_slice(&[0, 0]);
        v
    }
    fn eof(st: u16) -> Vec<u8> {
        let mut v = vec![0xfe, 0, 0];
        v.extend_from_slice(&st.to_le_bytes());
        v
    }
    fn ok_fe(st: u16) -> Vec<u8> {
        let mut v = ok(st);
        v[0] = 0xfe;
        v
    }
    fn count(n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        write_lenenc_int(&mut v, n);
        v
    }

    /// Feeds whole packets, checking needs_full is honoured by giving only
    /// the first byte where it is not needed.
    fn run(t: &mut Tracker, packets: &[Vec<u8>]) -> Vec<Packet> {
        let mut kinds = Vec::new();
        for p in packets {
            assert!(!t.is_done(), "tracker finished early");
            let full = t.needs_full(p.len(), p[0]);
            let slice = if full { &p[..] } else { &p[..1] };
            kinds.push(t.feed(p.len(), slice).unwrap());
        }
        kinds
    }

    const DATA: u8 = 0x03;

    #[test]
    fn query_ok() {
        let mut t = Tracker::new(Expect::Query, false);
        run(&mut t, &[ok(status::AUTOCOMMIT)]);
        assert!(t.is_done());
        assert_eq!(t.status(), status::AUTOCOMMIT);
    }

    #[test]
    fn query_resultset_classic_eof() {
        let mut t = Tracker::new(Expect::Query, false);
        let k = run(
            &mut t,
            &[
                count(2),
                vec![DATA; 30],
                vec![DATA; 30],
                eof(0),
                vec![DATA; 5],
                vec![0xfb, 1],
                eof(status::IN_TRANS),
            ],
        );
        assert!(t.is_done());
        assert_eq!(k[0], Packet::ColumnCount(2));
        assert_eq!(k[3], Packet::Eof);
        assert_eq!(t.status(), status::IN_TRANS);
    }

    #[test]
    fn query_resultset_deprecate_eof_and_multi_results() {
        let mut t = Tracker::new(Expect::Query, true);
        let k = run(
            &mut t,
            &[
                count(1),
                vec![DATA; 10],
                vec![DATA; 3],
                ok_fe(status::MORE_RESULTS_EXISTS),
                ok(status::MORE_RESULTS_EXISTS),
                count(1),
                vec![DATA; 10],
                ok_fe(0),
            ],
        );
        assert!(t.is_done());
        assert_eq!(k[3], Packet::Ok);
        assert_eq!(k[4], Packet::Ok);
    }

    #[test]
    fn error_mid_rows_ends_response() {
        let mut t = Tracker::new(Expect::Query, false);
        let k = run(
            &mut t,
            &[
                count(1),
                vec![DATA; 4],
                eof(0),
                vec![DATA; 2],
                vec![0xff, 1, 2],
            ],
        );
        assert_eq!(k.last(), Some(&Packet::Err));
        assert!(t.is_done());
    }

    #[test]
    fn big_rows_starting_with_fe_are_data() {
        let mut t = Tracker::new(Expect::Query, true);
        run(&mut t, &[count(1), vec![DATA; 4]]);
        // A row whose first cell is a >= 16 MiB string: first frame is a
        // full frame starting 0xFE, followed by a continuation.
        assert!(!t.needs_full(MAX_PAYLOAD, 0xfe));
        assert_eq!(t.feed(MAX_PAYLOAD, &[0xfe]).unwrap(), Packet::Data);
        assert!(!t.needs_full(10, 0xfe));
        assert_eq!(t.feed(10, &[0xfe]).unwrap(), Packet::Continuation);
        assert!(!t.is_done());
        run(&mut t, &[ok_fe(0)]);
        assert!(t.is_done());
    }

    #[test]
    fn whole_rows_stop_where_feed_would_look() {
        fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
            let mut f = (payload.len() as u32).to_le_bytes()[..3].to_vec();
            f.push(seq);
            f.extend_from_slice(payload);
            f
        }
        let mut t = Tracker::new(Expect::Query, true);
        // Not in rows yet: nothing is taken.
        assert_eq!(t.whole_rows(&frame(1, &[1, b'x'])), (0, 0, 0));
        run(&mut t, &[count(1), vec![DATA; 4]]);
        let rows = [
            frame(3, &[1, b'a']),
            frame(4, &[2, b'b', b'c']),
            frame(5, &[0xfb]),
        ];
        let mut buf: Vec<u8> = rows.concat();
        let whole = buf.len();
        // Then the terminator, which is left to feed.
        buf.extend_from_slice(&frame(6, &ok_fe(0)));
        assert_eq!(t.whole_rows(&buf), (whole, 3, 5));
        // A row not whole in the buffer stops the run before it.
        assert_eq!(t.whole_rows(&buf[..whole - 1]), (whole - 5, 2, 4));
        // An error, and a 16 MiB frame, are left to feed too.
        let mut err = rows[0].clone();
        err.extend_from_slice(&frame(4, &[0xff, 1, 2]));
        assert_eq!(t.whole_rows(&err), (rows[0].len(), 1, 3));
        let mut big = vec![0xff, 0xff, 0xff, 4, 0xfe];
        big.resize(4 + MAX_PAYLOAD, 0);
        assert_eq!(t.whole_rows(&big), (0, 0, 0));
        assert!(!t.is_done());
    }

    #[test]
    fn local_infile() {
        // As a text statement and as an executed prepared one.
        for expect in [Expect::Query, Expect::Execute] {
            let mut t = Tracker::new(expect, false);
            let k = run(&mut t, &[b"\xfbfile.csv".to_vec()]);
            assert_eq!(k[0], Packet::LocalInfile);
            assert!(t.awaiting_infile());
            t.infile_sent();
            run(&mut t, &[ok(0)]);
            assert!(t.is_done());
        }
    }

    #[test]
    fn prepare_with_params_and_columns() {
        for deprecate in [false, true] {
            let mut t = Tracker::new(Expect::Prepare, deprecate);
            let mut head = vec![0x00];
            head.extend_from_slice(&9u32.to_le_bytes());
            head.extend_from_slice(&2u16.to_le_bytes());
            head.extend_from_slice(&1u16.to_le_bytes());
            head.extend_from_slice(&[0, 0, 0]);
            let mut pk = vec![head, vec![DATA; 20]];
            if !deprecate {
                pk.push(eof(0));
            }
            pk.push(vec![DATA; 20]);
            pk.push(vec![DATA; 20]);
            if !deprecate {
                pk.push(eof(0));
            }
            let k = run(&mut t, &pk);
            assert!(t.is_done(), "deprecate={deprecate}");
            assert_eq!(
                k[0],
                Packet::PrepareOk {
                    stmt_id: 9,
                    columns: 2,
                    params: 1
                }
            );
        }
    }

    #[test]
    fn prepare_without_anything() {
        let mut t = Tracker::new(Expect::Prepare, false);
        let mut head = vec![0x00];
        head.extend_from_slice(&1u32.to_le_bytes());
        head.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0]);
        run(&mut t, &[head]);
        assert!(t.is_done());
    }

    #[test]
    fn execute_with_cursor_has_no_rows() {
        let mut t = Tracker::new(Expect::Execute, false);
        run(
            &mut t,
            &[count(1), vec![DATA; 9], eof(status::CURSOR_EXISTS)],
        );
        assert!(t.is_done());
        let mut f = Tracker::new(Expect::Fetch, false);
        run(&mut f, &[vec![0x00, 1, 2], eof(status::LAST_ROW_SENT)]);
        assert!(f.is_done());
    }

    #[test]
    fn single_packet_commands() {
        let mut t = Tracker::new(Expect::Single, false);
        run(&mut t, &[b"Uptime: 5  Threads: 1".to_vec()]);
        assert!(t.is_done());
        let mut t = Tracker::new(Expect::Single, false);
        run(&mut t, &[eof(status::AUTOCOMMIT)]);
        assert!(t.is_done());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut t = Tracker::new(Expect::Prepare, false);
        assert!(t.feed(3, &[0x00, 1, 2]).is_err());
        let mut t = Tracker::new(Expect::Query, false);
        assert!(t.feed(1, &[0xfe]).is_err());
        let mut t = Tracker::new(Expect::Query, false);
        assert!(t.feed(0, &[]).is_err());
    }
}
