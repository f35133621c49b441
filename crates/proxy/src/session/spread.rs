//! A sharded statement over several groups: a lease on each, the
//! statement scattered to them, their rows relayed one group after
//! another or merged, and the same statement broadcast to every group.

use super::merge::{write_end, Fail};
use super::Session;
use crate::errors::SessionError;
use crate::runtime::Sharding;
use sextant_backend::{Binding, Lease};
use sextant_protocol::codec::write_packet;
use sextant_protocol::packets::{write_ok, OkPacket};
use sextant_routing::{plan, Command, Target};
use sextant_sharding::analyze::GroupSet;
use sextant_sql::Classification;
use std::sync::Arc;

impl Session {
    /// One connection per group, each brought to the session's state, for
    /// `target` (a read's replica or primary, by each group's rules);
    /// `own_writes`: the read must see the session's (or its user's)
    /// writes, each group its own.
    pub(super) async fn leases_for(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        target: Target,
        own_writes: Option<sextant_config::ConsistencyScope>,
    ) -> Result<Vec<Lease>, SessionError> {
        let home = self.group.clone();
        let mut leases = Vec::with_capacity(set.len() as usize);
        // In a fleet each group's primary position is read for its own
        // connection (Session::fleet_need).
        let (need, fleet) = (self.stmt.need, self.stmt.fleet);
        for i in set.iter() {
            let Some(g) = sh.groups.get(i).cloned() else {
                continue;
            };
            (self.stmt.need, self.stmt.fleet) = (need, fleet);
            self.enter_group(sh, g, Some(i));
            // The write this group's connection must have is this group's
            // (the plan was made in the session's own group).
            if let Some(scope) = own_writes {
                self.stmt.need = self.own_write(scope);
            }
            let got = self.attach(target).await;
            let lease = match std::mem::take(&mut self.binding) {
                Binding::Direct(l) => Some(l),
                _ => None,
            };
            if let Err(e) = got {
                self.enter_group(sh, home, None);
                return Err(e);
            }
            leases.extend(lease);
        }
        let home_index = sh.groups.iter().position(|x| Arc::ptr_eq(x, &home));
        self.enter_group(sh, home, home_index);
        Ok(leases)
    }

    /// One connection per group of `set` for a statement over several
    /// groups: in a distributed transaction its branches, otherwise
    /// connections by each group's routing of `c`.
    pub(super) async fn spread_leases(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        c: &Classification<'_>,
    ) -> Result<Vec<Lease>, SessionError> {
        if self.in_dist() {
            return self.xa_take(sh, set).await;
        }
        let p = plan_for(self, c);
        self.require(&p);
        self.release();
        self.leases_for(sh, set, p.target, p.read.own_writes).await
    }

    /// Gives back what [`Session::spread_leases`] lent. `finished`: which
    /// connections read their answer to the end (None: none is known
    /// to have).
    pub(super) async fn spread_return(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        leases: Vec<Lease>,
        finished: Option<Vec<bool>>,
    ) {
        if self.in_dist() {
            return self.xa_put_back(sh, set, leases, finished).await;
        }
        match finished {
            None => leases.into_iter().for_each(Lease::discard),
            Some(f) => {
                for (l, done) in leases.into_iter().zip(f) {
                    match done {
                        true => drop(l),
                        false => l.discard(),
                    }
                }
            }
        }
    }

    /// A read over several groups: the same statement on each, the rows
    /// of all relayed as one result (the first group's column
    /// definitions, every group's rows in turn, one end).
    pub(super) async fn scatter(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        packet: &[u8],
        binary: bool,
    ) -> Result<(), SessionError> {
        // The router sends only plain reads here. The text follows the
        // command byte, and under query attributes the attributes.
        let at = self.text_at(packet)?;
        let c = sextant_sql::classify(packet.get(at..).unwrap_or_default());
        let mut leases = self.spread_leases(sh, set, &c).await?;
        // Every group starts at once; each answer waits in its socket
        // until its turn.
        for l in leases.iter_mut() {
            if let Err(e) = l.conn_mut().send(0, packet).await {
                self.spread_return(sh, set, leases, None).await;
                return Err(e.into());
            }
        }
        let mut seq: u8 = 1;
        let mut sent_header = false;
        let mut columns = 0u64;
        let mut types = binary.then(Vec::new);
        let eof_mode = !self.flavor.deprecate_eof();
        let mut result: Result<(), Fail> = Ok(());
        let mut done = 0;
        for (k, l) in leases.iter_mut().enumerate() {
            let r = relay_group(
                l,
                &mut self.client.out,
                &mut seq,
                &mut sent_header,
                &mut columns,
                eof_mode,
                types.as_mut(),
            )
            .await;
            if let Err(e) = r {
                result = Err(e);
                break;
            }
            done = k + 1;
            if self.client.out.len() >= 64 * 1024 {
                self.client.flush().await?;
            }
        }
        match result {
            Ok(()) => {
                write_end(&mut self.client.out, seq, self.status, eof_mode);
                let n = leases.len();
                self.spread_return(sh, set, leases, Some(vec![true; n]))
                    .await;
                self.client.flush().await?;
                self.read_done();
                Ok(())
            }
            Err(e) => {
                // The groups not read to the end have answers pending:
                // their connections are closed.
                let finished = match self.in_dist() {
                    // A branch's state after a failure part way is not
                    // known: the transaction can only roll back.
                    true => None,
                    false => Some((0..leases.len()).map(|k| k < done).collect()),
                };
                self.spread_return(sh, set, leases, finished).await;
                self.fail_spread(e, sent_header.then_some(seq)).await
            }
        }
    }

    /// A read over several groups whose rows are merged by the ORDER BY
    /// items (hidden columns each group adds) and cut to the LIMIT. Rows
    /// stream: one row per group is held at a time, whatever the OFFSET.
    pub(super) async fn merge(
        &mut self,
        sh: &Arc<Sharding>,
        plan: &sextant_sharding::route::MergePlan,
        packet: &[u8],
        binary: bool,
    ) -> Result<(), SessionError> {
        // The statement each group runs, after the client's command
        // prefix (COM_QUERY, and its attributes under QUERY_ATTRIBUTES).
        let prefix = self.text_at(packet)?;
        let mut q = Vec::with_capacity(prefix + plan.sql.len());
        q.extend_from_slice(&packet[..prefix]);
        q.extend_from_slice(&plan.sql);
        let c = sextant_sql::classify(&plan.sql);
        let mut leases = self.spread_leases(sh, plan.groups, &c).await?;
        for l in leases.iter_mut() {
            if let Err(e) = l.conn_mut().send(0, &q).await {
                self.spread_return(sh, plan.groups, leases, None).await;
                return Err(e.into());
            }
        }
        let eof_mode = !self.flavor.deprecate_eof();
        let res = match &plan.grouped {
            None => {
                super::merge::merge_rows(
                    &mut leases,
                    &mut self.client,
                    plan,
                    eof_mode,
                    self.status,
                    binary,
                )
                .await
            }
            Some(g) => {
                super::merge::merge_grouped(
                    &mut leases,
                    &mut self.client,
                    g,
                    eof_mode,
                    self.status,
                    sh.merge_memory,
                    binary,
                )
                .await
            }
        };
        match res {
            Ok(finished) => {
                // Rows the LIMIT did not need may still be coming.
                self.spread_return(sh, plan.groups, leases, Some(finished))
                    .await;
                self.read_done();
                Ok(())
            }
            Err((e, sent)) => {
                self.spread_return(sh, plan.groups, leases, None).await;
                self.fail_spread(e, sent).await
            }
        }
    }

    /// A statement over several groups failed. Nothing sent yet (`sent`
    /// None): the client gets the server's own error, or sextant's. Rows
    /// already went out (`sent`: the next sequence number): the client gets
    /// an error in place of the next row, and drops the result.
    pub(super) async fn fail_spread(
        &mut self,
        e: Fail,
        sent: Option<u8>,
    ) -> Result<(), SessionError> {
        if sent.is_none() {
            self.client.out.clear();
        }
        // An error, whichever gives it; which connection holds its
        // condition no one knows.
        self.last = super::last::Last::spread_failed();
        let e = match e {
            Fail::Server(_, pkt) if sent.is_none() => {
                write_packet(&mut self.client.out, 1, &pkt);
                return self.client.flush().await;
            }
            Fail::Server(addr, pkt) => server_error(&addr, &pkt),
            Fail::Other(e) => e,
        };
        let Some(seq) = sent else {
            return Err(e);
        };
        let text = e.to_string();
        let mut err = Vec::with_capacity(text.len() + 9);
        err.push(0xff);
        err.extend_from_slice(&crate::errors::ER_SEXTANT_SHARD_PARTIAL.to_le_bytes());
        err.extend_from_slice(b"#HY000");
        err.extend_from_slice(text.as_bytes());
        write_packet(&mut self.client.out, seq, &err);
        self.client.flush().await
    }

    /// A DDL on every group holding its table, one after another, each on
    /// its primary. A failure stops it, and says which groups it reached.
    pub(super) async fn broadcast(
        &mut self,
        sh: &Arc<Sharding>,
        set: GroupSet,
        packet: &[u8],
    ) -> Result<(), SessionError> {
        self.release();
        let mut done: Vec<&str> = Vec::new();
        let mut warnings = 0u16;
        for i in set.iter() {
            let name = sh.router.group_name(i);
            let mut leases = self
                .leases_for(sh, GroupSet::one(i), Target::Primary, None)
                .await?;
            let Some(l) = leases.first_mut() else {
                continue;
            };
            let answer = async {
                l.conn_mut().send(0, packet).await?;
                l.conn_mut().read_packet().await
            }
            .await;
            let pkt = match answer {
                Ok((_, pkt)) => pkt,
                Err(e) => {
                    leases.into_iter().for_each(Lease::discard);
                    return Err(SessionError::ShardPartial(format!(
                        "the statement ran on {} and failed on group {name}: {e}; it was not sent to the groups after it",
                        if done.is_empty() { "no group".to_string() } else { format!("groups {}", done.join(", ")) }
                    )));
                }
            };
            match pkt.first() {
                Some(0x00) => {
                    if let Ok(ok) = sextant_protocol::packets::parse_ok(&pkt, true) {
                        warnings = warnings.saturating_add(ok.warnings);
                    }
                    done.push(name);
                }
                _ => {
                    let msg = match pkt.get(9..) {
                        Some(m) if pkt.first() == Some(&0xff) => {
                            String::from_utf8_lossy(m).into_owned()
                        }
                        _ => "an unexpected answer".to_string(),
                    };
                    drop(leases);
                    if done.is_empty() {
                        // Nothing ran anywhere: the server's own error.
                        self.last = super::last::Last::spread_failed();
                        self.client.out.clear();
                        write_packet(&mut self.client.out, 1, &pkt);
                        return self.client.flush().await;
                    }
                    return Err(SessionError::ShardPartial(format!(
                        "the statement ran on groups {} and failed on group {name}: {msg}; it was not sent to the groups after it",
                        done.join(", ")
                    )));
                }
            }
        }
        let ok = OkPacket {
            status: self.status,
            warnings,
            ..Default::default()
        };
        write_ok(&mut self.client.out, 1, &ok, false);
        self.client.flush().await
    }
}

pub(super) fn names(sh: &Sharding, set: GroupSet) -> String {
    set.iter()
        .map(|i| sh.router.group_name(i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Relays one group's result set: its header and column definitions only
/// for the first group (the others' are read and dropped), its rows, and
/// not its end (the caller writes one for all).
pub(super) async fn relay_group(
    l: &mut Lease,
    out: &mut Vec<u8>,
    seq: &mut u8,
    sent_header: &mut bool,
    columns: &mut u64,
    eof_mode: bool,
    // Some: rows go out in the binary protocol, by these column types
    // (read from the first group's definitions).
    mut types: Option<&mut Vec<sextant_protocol::binary::ColumnType>>,
) -> Result<(), Fail> {
    let conn = l.conn_mut();
    let (_, first) = conn.read_packet().await?;
    match first.first() {
        Some(0xff) => return Err(Fail::Server(conn.addr.clone(), first)),
        Some(0x00) | None => {
            return Err(Fail::Other(SessionError::ShardUnsupported(
                "a statement spread over several groups returned no rows on one of them".into(),
            )))
        }
        _ => {}
    }
    let n = super::merge::lenenc(&first);
    let header = !*sent_header;
    if header {
        *seq = write_packet(out, *seq, &first);
        *columns = n;
    } else if n != *columns {
        return Err(Fail::Other(SessionError::ShardUnsupported(format!(
            "the groups answered with different columns ({} and {n})",
            *columns
        ))));
    }
    for _ in 0..n {
        let (_, def) = conn.read_packet().await?;
        if header {
            *seq = write_packet(out, *seq, &def);
            if let Some(t) = types.as_mut() {
                t.push(super::merge::column_type(&def)?);
            }
        }
    }
    if eof_mode {
        let (_, eof) = conn.read_packet().await?;
        if header {
            *seq = write_packet(out, *seq, &eof);
        }
    }
    *sent_header = true;
    loop {
        let (_, row) = conn.read_packet().await?;
        match row.first() {
            Some(0xff) => return Err(Fail::Server(conn.addr.clone(), row)),
            // The end: an EOF, or an OK with the EOF header.
            Some(0xfe) if row.len() < 0xff_ff_ff => return Ok(()),
            _ => match types.as_deref() {
                None => *seq = write_packet(out, *seq, &row),
                Some(t) => *seq = write_packet(out, *seq, &super::merge::binary_row(&row, t)?),
            },
        }
    }
}

pub(super) fn server_error(addr: &str, pkt: &[u8]) -> SessionError {
    let code = pkt
        .get(1..3)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    let msg = pkt
        .get(9..)
        .map_or(String::new(), |m| String::from_utf8_lossy(m).into_owned());
    SessionError::ShardPartial(format!("server {addr} answered error {code}: {msg}"))
}

pub(super) fn plan_for(s: &mut Session, c: &Classification<'_>) -> sextant_routing::Plan {
    plan(
        c,
        s.facts(),
        &s.user.policy(),
        s.group.plan_facts(),
        Command::Query,
        &mut s.cursor,
    )
}
