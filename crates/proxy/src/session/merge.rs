//! Reading several groups' answers to one read and writing the merged
//! result: rows in ORDER BY order cut to the LIMIT, or groups of a GROUP
//! BY / DISTINCT / aggregate read combined. What is compared and combined
//! is decided by `sextant_sharding::merge`; this file reads packets and
//! writes them. At most one row per group is held, except for groups
//! sorted by an aggregate, which are held up to the configured bound.

use crate::client::Client;
use crate::errors::SessionError;
use sextant_backend::Lease;
use sextant_protocol::binary::ColumnType;
use sextant_protocol::codec::write_packet;
use sextant_protocol::consts::status;
use sextant_protocol::packets::column_meta;
use sextant_protocol::packets::{write_eof, write_ok, OkPacket};
use sextant_sharding::merge::{self, Column, GroupPlan, Grouper, Row, ValueKind};
use sextant_sharding::route::MergePlan;
use std::cmp::Ordering;
use std::sync::Arc;

/// Which groups were read to their end (the others are closed); on error,
/// whether anything reached the client (the next sequence number).
pub(super) type Merged = Result<Vec<bool>, (Fail, Option<u8>)>;

/// A column's type for the binary protocol, from its definition.
pub(super) fn column_type(def: &[u8]) -> Result<ColumnType, Fail> {
    let m = column_meta(def).map_err(|e| refused(format!("column definition: {e}")))?;
    Ok(ColumnType {
        ty: m.ty,
        unsigned: m.flags & 0x20 != 0,
    })
}

/// A text row written in the binary protocol.
pub(super) fn binary_row(text: &[u8], types: &[ColumnType]) -> Result<Vec<u8>, Fail> {
    sextant_protocol::binary::row_from_text(text, types).ok_or_else(|| {
        refused("a value the server wrote that sextant cannot write in the binary protocol".into())
    })
}

/// Writes one row: as it is, or in the binary protocol (`types`).
fn emit(out: &mut Vec<u8>, seq: u8, row: &[u8], types: Option<&[ColumnType]>) -> Result<u8, Fail> {
    Ok(match types {
        None => write_packet(out, seq, row),
        Some(t) => write_packet(out, seq, &binary_row(row, t)?),
    })
}

fn refused(why: String) -> Fail {
    Fail::Other(SessionError::ShardUnsupported(why))
}

/// One group's current row (None at its end).
struct Stream {
    row: Option<Row>,
}

async fn next_row(l: &mut Lease, n: usize) -> Result<Stream, Fail> {
    let conn = l.conn_mut();
    let (_, row) = conn.read_packet().await?;
    match row.first() {
        Some(0xff) => Err(Fail::Server(conn.addr.clone(), row)),
        Some(0xfe) if row.len() < 0xff_ff_ff => Ok(Stream { row: None }),
        _ => match Row::new(row, n) {
            Some(r) => Ok(Stream { row: Some(r) }),
            None => Err(refused(
                "a row that does not read as text-protocol cells".into(),
            )),
        },
    }
}

/// Reads every group's column definitions; writes the first group's
/// visible ones to the client (not flushed). Returns what each column of
/// the groups' rows is, the visible columns' binary-protocol types (when
/// `binary`), and the next sequence number.
async fn headers(
    leases: &mut [Lease],
    client: &mut Client,
    hidden: usize,
    eof_mode: bool,
    binary: bool,
) -> Result<(Vec<Column>, Option<Vec<ColumnType>>, u8), Fail> {
    let mut seq: u8 = 1;
    let mut columns = Vec::new();
    let mut types = binary.then(Vec::new);
    let mut n = 0;
    for (k, l) in leases.iter_mut().enumerate() {
        let conn = l.conn_mut();
        let (_, first) = conn.read_packet().await?;
        match first.first() {
            Some(0xff) => return Err(Fail::Server(conn.addr.clone(), first)),
            Some(0x00) | None => {
                return Err(refused(
                    "a read over several groups returned no rows on one of them".into(),
                ))
            }
            _ => {}
        }
        let cols = lenenc(&first) as usize;
        if k == 0 {
            n = cols;
            if cols < hidden {
                return Err(refused("fewer columns than the merge added".into()));
            }
        } else if cols != n {
            return Err(refused(format!(
                "the groups answered with different columns ({n} and {cols})"
            )));
        }
        let mut defs = Vec::with_capacity(cols);
        for _ in 0..cols {
            defs.push(conn.read_packet().await?.1);
        }
        if eof_mode {
            conn.read_packet().await?;
        }
        if k > 0 {
            continue;
        }
        for def in &defs {
            let m = column_meta(def).map_err(|e| refused(format!("column definition: {e}")))?;
            columns.push(Column {
                kind: ValueKind::of(m.ty, m.flags, m.charset),
                decimals: m.decimals,
            });
        }
        let visible = cols - hidden;
        let mut count = Vec::with_capacity(9);
        sextant_protocol::codec::write_lenenc_int(&mut count, visible as u64);
        client.out.clear();
        seq = write_packet(&mut client.out, seq, &count);
        for def in &defs[..visible] {
            seq = write_packet(&mut client.out, seq, def);
            if let Some(t) = types.as_mut() {
                t.push(column_type(def)?);
            }
        }
        if eof_mode {
            seq = write_packet(&mut client.out, seq, &[0xfe, 0, 0, 0x02, 0]);
        }
    }
    Ok((columns, types, seq))
}

/// The index of the stream whose row comes first (the lowest group first
/// among equals).
fn first_of(streams: &[Stream], order: impl Fn(&Row, &Row) -> Ordering) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, s) in streams.iter().enumerate() {
        let Some(row) = &s.row else { continue };
        match best.and_then(|b| streams[b].row.as_ref()) {
            Some(b) if order(row, b) != Ordering::Less => {}
            _ => best = Some(i),
        }
    }
    best
}

/// Rows in ORDER BY order (the hidden columns cut off), OFFSET skipped, up
/// to the LIMIT, then one end.
pub(super) async fn merge_rows(
    leases: &mut [Lease],
    client: &mut Client,
    plan: &MergePlan,
    eof_mode: bool,
    session_status: u16,
    binary: bool,
) -> Merged {
    let hidden = plan.hidden();
    let (columns, types, mut seq) = headers(leases, client, hidden, eof_mode, binary)
        .await
        .map_err(|e| (e, None))?;
    let n = columns.len();
    let visible = n - hidden;
    let mut kinds = Vec::with_capacity(plan.order.len());
    for j in 0..plan.order.len() {
        match &columns[visible + 3 * j].kind {
            Ok(k) => kinds.push(*k),
            Err(why) => {
                return Err((
                    refused(format!(
                        "a read over several groups ordered by {why}: sextant cannot merge by it"
                    )),
                    None,
                ))
            }
        }
    }
    let order = |a: &Row, b: &Row| {
        for (j, kind) in kinds.iter().enumerate() {
            let o = merge::compare_at(*kind, a, b, visible + 3 * j);
            let o = if plan.order[j] { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    };
    let mut streams = Vec::with_capacity(leases.len());
    for l in leases.iter_mut() {
        streams.push(next_row(l, n).await.map_err(|e| (e, None))?);
    }
    let mut flushed = false;
    let mut skipped = 0u64;
    let mut sent = 0u64;
    loop {
        if plan.count.is_some_and(|c| sent >= c) {
            break;
        }
        let Some(b) = first_of(&streams, order) else {
            break;
        };
        if skipped < plan.offset {
            skipped += 1;
        } else if let Some(row) = &streams[b].row {
            let cells = &row.bytes[..row.visible_end(visible)];
            seq = emit(&mut client.out, seq, cells, types.as_deref())
                .map_err(|e| (e, flushed.then_some(seq)))?;
            sent += 1;
            if client.out.len() >= 64 * 1024 {
                client
                    .flush()
                    .await
                    .map_err(|e| (Fail::Other(e), Some(seq)))?;
                flushed = true;
            }
        }
        streams[b] = next_row(&mut leases[b], n)
            .await
            .map_err(|e| (e, flushed.then_some(seq)))?;
    }
    finish(client, seq, session_status, eof_mode).await?;
    Ok(streams.iter().map(|s| s.row.is_none()).collect())
}

/// A GROUP BY, DISTINCT or aggregate read: the groups' rows, each sorted
/// by the keys, merged by them; rows of equal keys combined into one
/// group; HAVING applied; then either streamed (the keys' order is the
/// result's) or held, sorted and cut (ORDER BY an aggregate), within
/// `memory` bytes.
pub(super) async fn merge_grouped(
    leases: &mut [Lease],
    client: &mut Client,
    plan: &GroupPlan,
    eof_mode: bool,
    session_status: u16,
    memory: usize,
    binary: bool,
) -> Merged {
    let hidden = plan.columns.saturating_sub(plan.visible);
    let (columns, types, mut seq) = headers(leases, client, hidden, eof_mode, binary)
        .await
        .map_err(|e| (e, None))?;
    let n = columns.len();
    let mut grouper = Grouper::new(plan, &columns).map_err(|why| (refused(why), None))?;
    let mut streams = Vec::with_capacity(leases.len());
    for l in leases.iter_mut() {
        streams.push(next_row(l, n).await.map_err(|e| (e, None))?);
    }
    let mut out = Out {
        seq,
        flushed: false,
        skipped: 0,
        sent: 0,
        held: Vec::new(),
        bytes: 0,
        memory,
        types,
    };
    loop {
        if plan.order.is_none() && plan.count.is_some_and(|c| out.sent >= c) {
            break;
        }
        let Some(b) = first_of(&streams, |x, y| grouper.order(x, y)) else {
            let last = grouper.finish().map_err(|why| (refused(why), out.sent()))?;
            out.group(client, plan, last).await?;
            break;
        };
        if let Some(row) = streams[b].row.take() {
            let g = grouper
                .push(row)
                .map_err(|why| (refused(why), out.sent()))?;
            out.group(client, plan, g).await?;
        }
        streams[b] = next_row(&mut leases[b], n)
            .await
            .map_err(|e| (e, out.sent()))?;
    }
    if plan.order.is_some() {
        merge::sort_groups(&mut out.held);
        let held = std::mem::take(&mut out.held);
        for g in held
            .into_iter()
            .skip(plan.offset.min(usize::MAX as u64) as usize)
            .take(
                plan.count
                    .map_or(usize::MAX, |c| c.min(usize::MAX as u64) as usize),
            )
        {
            out.seq = emit(&mut client.out, out.seq, &g.row, out.types.as_deref())
                .map_err(|e| (e, out.sent()))?;
            out.flush_some(client).await?;
        }
    }
    seq = out.seq;
    finish(client, seq, session_status, eof_mode).await?;
    Ok(streams.iter().map(|s| s.row.is_none()).collect())
}

/// Where merged groups go: straight to the client (OFFSET skipped, up to
/// the LIMIT), or held to be sorted.
struct Out {
    seq: u8,
    flushed: bool,
    skipped: u64,
    sent: u64,
    held: Vec<merge::Group>,
    bytes: usize,
    memory: usize,
    /// Rows go out in the binary protocol, by these types.
    types: Option<Vec<ColumnType>>,
}

impl Out {
    fn sent(&self) -> Option<u8> {
        self.flushed.then_some(self.seq)
    }

    async fn group(
        &mut self,
        client: &mut Client,
        plan: &GroupPlan,
        g: Option<merge::Group>,
    ) -> Result<(), (Fail, Option<u8>)> {
        let Some(g) = g else { return Ok(()) };
        if plan.order.is_some() {
            self.bytes += g.size();
            if self.bytes > self.memory {
                return Err((
                    Fail::Other(SessionError::ShardMergeMemory(self.memory >> 20)),
                    self.sent(),
                ));
            }
            self.held.push(g);
            return Ok(());
        }
        if plan.count.is_some_and(|c| self.sent >= c) {
            return Ok(());
        }
        if self.skipped < plan.offset {
            self.skipped += 1;
            return Ok(());
        }
        self.seq = emit(&mut client.out, self.seq, &g.row, self.types.as_deref())
            .map_err(|e| (e, self.sent()))?;
        self.sent += 1;
        self.flush_some(client).await
    }

    async fn flush_some(&mut self, client: &mut Client) -> Result<(), (Fail, Option<u8>)> {
        if client.out.len() >= 64 * 1024 {
            client
                .flush()
                .await
                .map_err(|e| (Fail::Other(e), Some(self.seq)))?;
            self.flushed = true;
        }
        Ok(())
    }
}

async fn finish(
    client: &mut Client,
    seq: u8,
    session_status: u16,
    eof_mode: bool,
) -> Result<(), (Fail, Option<u8>)> {
    write_end(&mut client.out, seq, session_status, eof_mode);
    client
        .flush()
        .await
        .map_err(|e| (Fail::Other(e), Some(seq)))
}

pub(super) fn lenenc(p: &[u8]) -> u64 {
    match p.first() {
        Some(&b) if b < 0xfb => b as u64,
        Some(0xfc) if p.len() >= 3 => u16::from_le_bytes([p[1], p[2]]) as u64,
        Some(0xfd) if p.len() >= 4 => u32::from_le_bytes([p[1], p[2], p[3], 0]) as u64,
        _ => 0,
    }
}

/// One end for a result made of several groups' rows: the session's own
/// status (the groups' ends are not relayed).
pub(super) fn write_end(out: &mut Vec<u8>, seq: u8, session_status: u16, eof_mode: bool) {
    let st = session_status & !status::MORE_RESULTS_EXISTS;
    if eof_mode {
        write_eof(out, seq, st);
    } else {
        let ok = OkPacket {
            header: 0xfe,
            status: st,
            ..Default::default()
        };
        write_ok(out, seq, &ok, false);
    }
}

/// Why a group's answer could not be relayed: the server's error packet,
/// or anything else.
pub(super) enum Fail {
    Server(Arc<str>, Vec<u8>),
    Other(SessionError),
}

impl<E: Into<SessionError>> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail::Other(e.into())
    }
}
