//! The admin port: MySQL protocol, its own user, and the commands of the
//! admin crate.

use crate::client::Client;
use crate::errors::SessionError;
use crate::frontend;
use crate::shared::{AdminUsers, Shared};
use sextant_admin::{execute, Answer};
use sextant_protocol::consts::{cap, com, status};
use sextant_protocol::packets::{coltype, write_err, write_simple_ok, write_text_resultset};
use std::sync::Arc;
use tokio::net::TcpListener;

pub async fn serve(listener: TcpListener, shared: Arc<Shared>, users: Arc<AdminUsers>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let users = users.clone();
        tokio::spawn(async move {
            let mut client = Client::new(stream, peer, crate::client::PRE_AUTH_MAX_PACKET);
            if let Err(e) = session(&mut client, &shared, &users).await {
                tracing::debug!(%peer, "admin session ended: {e}");
            }
        });
    }
}

async fn session(
    client: &mut Client,
    shared: &Shared,
    users: &AdminUsers,
) -> Result<(), SessionError> {
    let id = shared.new_conn_id();
    // The same handshake timeout as the proxy port: a silent connection
    // must not hold a file descriptor for ever.
    let timeout =
        std::time::Duration::from_millis(shared.runtime().config.proxy.handshake_timeout_ms);
    let login = tokio::time::timeout(
        timeout,
        frontend::login(client, users, &shared.admin_auth, "8.0.0-sextant-admin", id),
    )
    .await
    .unwrap_or_else(|_| {
        Err(SessionError::Handshake(format!(
            "no complete login within {} ms",
            timeout.as_millis()
        )))
    });
    let login = match login {
        Ok(l) => l,
        Err(e @ (SessionError::ClientClosed | SessionError::ClientIo(_))) => return Err(e),
        Err(e) => {
            tracing::warn!(peer = %client.peer, "admin login failed: {e}");
            let seq = client.last_seq.wrapping_add(1);
            let _ = client.send_error(seq, &e).await;
            return Err(e);
        }
    };
    tracing::info!(peer = %client.peer, user = %login.user, "admin login");
    client.max_packet = 1 << 20;
    frontend::send_ok(client, login.seq);
    client.flush().await?;
    frontend::start_compression(client, &login);
    let deprecate_eof = login.caps & cap::DEPRECATE_EOF != 0;
    let mut payload = Vec::new();
    loop {
        client.read_packet(&mut payload).await?;
        match payload.first() {
            Some(&com::QUIT) | None => return Ok(()),
            Some(&com::PING) | Some(&com::INIT_DB) => {
                write_simple_ok(&mut client.out, 1, status::AUTOCOMMIT)
            }
            Some(&com::QUERY) => {
                let sql = String::from_utf8_lossy(&payload[1..]);
                let first = sql.split_whitespace().next().unwrap_or("");
                if login.user == crate::shared::PEER_USER && !peer_may(&sql) {
                    write_err(
                        &mut client.out,
                        1,
                        1227,
                        "42000",
                        "Access denied; a fleet peer's login may only forward KILL and run SHOW SESSIONS",
                    );
                    client.flush().await?;
                    continue;
                }
                let reads = ["SHOW", "SELECT", "SET", "EXPLAIN", "HELP"];
                let upper = sql.to_ascii_uppercase();
                // (SET is mostly client libraries' noise; a routing SET is
                // logged with its outcome below.)
                let set_state = first.eq_ignore_ascii_case("SET")
                    && (upper.contains("MAINTENANCE") || upper.contains("BACKEND"));
                if !reads.iter().any(|w| first.eq_ignore_ascii_case(w)) || set_state {
                    tracing::info!(peer = %client.peer, user = %login.user, "admin command: {}", sql.trim());
                }
                let answer = crate::admin_context::with_context(shared, |ctx| execute(&sql, ctx));
                match answer {
                    Answer::Table(t) => write_table(&mut client.out, &t, deprecate_eof),
                    Answer::Ok => write_simple_ok(&mut client.out, 1, status::AUTOCOMMIT),
                    Answer::Kill {
                        id,
                        query_only,
                        as_user,
                    } => match kill(shared, id, query_only, as_user.as_deref()).await {
                        Ok(()) => write_simple_ok(&mut client.out, 1, status::AUTOCOMMIT),
                        Err(e) => write_error(&mut client.out, e),
                    },
                    Answer::ShardSchema { db, table, groups } => {
                        let t = shard_schema(shared, &db, &table, &groups).await;
                        write_table(&mut client.out, &t, deprecate_eof);
                    }
                    Answer::ShowAccounts => write_table(
                        &mut client.out,
                        &crate::accounts::table(shared).await,
                        deprecate_eof,
                    ),
                    Answer::ShowXa => {
                        write_table(&mut client.out, &xa_table(shared), deprecate_eof)
                    }
                    Answer::XaResolve { gtrid, commit } => {
                        match crate::xa_recovery::resolve(shared, &gtrid, commit).await {
                            Ok(n) => {
                                tracing::info!(gtrid = %gtrid, commit, branches = n, "XA transaction resolved from the admin port");
                                let ok = sextant_protocol::packets::OkPacket {
                                    affected_rows: n as u64,
                                    status: status::AUTOCOMMIT,
                                    ..Default::default()
                                };
                                sextant_protocol::packets::write_ok(&mut client.out, 1, &ok, false);
                            }
                            Err(m) => write_err(&mut client.out, 1, 1397, "XAE04", &m),
                        }
                    }
                    Answer::Switchover { group, to } => {
                        let r = switchover(shared, &group, to).await;
                        reply_change(client, r);
                    }
                    Answer::Reload => {
                        let r = crate::reload::reload(shared).await;
                        crate::reload::log_outcome("admin port", &r);
                        match r {
                            Ok(done) => write_info(&mut client.out, &done.to_string()),
                            Err(m) => write_error(&mut client.out, SessionError::ReloadRefused(m)),
                        }
                    }
                    Answer::SetBackend { addr, state } => {
                        let r = crate::fleet::set_backend(shared, &addr, &state).await;
                        reply_change(client, r);
                    }
                    Answer::PushConfig { path, base } => {
                        let r = crate::fleet::push(shared, path, base).await;
                        reply_change(client, r);
                    }
                    Answer::ShowFleetSessions => match crate::fleet::sessions(shared).await {
                        Ok(t) => write_table(&mut client.out, &t, deprecate_eof),
                        Err(m) => write_err(&mut client.out, 1, 1064, "42000", &m),
                    },
                    Answer::ShowFleet => match crate::fleet::table(shared) {
                        Ok(t) => write_table(&mut client.out, &t, deprecate_eof),
                        Err(m) => write_err(&mut client.out, 1, 1064, "42000", &m),
                    },
                    Answer::SetRouting { key, value } => {
                        let r = crate::fleet::set_routing(shared, &key, &value).await;
                        reply_change(client, r);
                    }
                    Answer::ShowDigests => {
                        let rows = crate::digests::gather_digests(shared).await;
                        let t = sextant_admin::commands::digests::table(rows);
                        write_table(&mut client.out, &t, deprecate_eof);
                    }
                    Answer::ResetDigests => {
                        crate::digests::reset_digests(shared);
                        write_simple_ok(&mut client.out, 1, status::AUTOCOMMIT)
                    }
                    Answer::Error(m) => write_err(&mut client.out, 1, 1064, "42000", &m),
                    Answer::UnknownVariable(m) => write_err(&mut client.out, 1, 1193, "HY000", &m),
                }
            }
            Some(&other) => {
                let e = SessionError::UnknownCommand(other);
                let (code, state, msg) = e.mysql();
                write_err(&mut client.out, 1, code, state, &msg);
            }
        }
        client.flush().await?;
    }
}

/// What a change asked on the admin port did (logged), or why it was not
/// made.
/// Hands a planned switchover to the group's failover task and waits for
/// its outcome.
async fn switchover(
    shared: &Shared,
    group: &str,
    to: Option<String>,
) -> Result<String, SessionError> {
    let rt = shared.runtime();
    let g = rt.pool.groups.get(group).ok_or_else(|| {
        SessionError::Switchover(format!("no group {group:?}; SHOW GROUPS lists them"))
    })?;
    if !g.ha.auto() {
        return Err(SessionError::Switchover(format!(
            "group {group} has failover = \"off\": sextant changes its primary only with failover = \"auto\" (docs/failover.md)"
        )));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    g.ha.request_switchover(sextant_backend::ha::SwitchRequest { to, reply: tx })
        .map_err(|_| {
            SessionError::Switchover(format!("a switchover of {group} is already under way"))
        })?;
    match tokio::time::timeout(std::time::Duration::from_secs(120), rx).await {
        Ok(Ok(Ok(done))) => Ok(done),
        Ok(Ok(Err(why))) => Err(SessionError::Switchover(why)),
        Ok(Err(_)) => Err(SessionError::Switchover(
            "the group's failover task stopped (a reload replaced the group?)".into(),
        )),
        Err(_) => Err(SessionError::Switchover(
            "no outcome within 120 s; SHOW GROUPS says where it stands".into(),
        )),
    }
}

fn reply_change(client: &mut Client, r: Result<String, SessionError>) {
    match r {
        Ok(info) => {
            if !info.is_empty() {
                tracing::info!(peer = %client.peer, "admin: {info}");
            }
            write_info(&mut client.out, &info);
        }
        Err(e) => write_error(&mut client.out, e),
    }
}

/// An OK whose message says what was done.
fn write_info(out: &mut Vec<u8>, info: &str) {
    let ok = sextant_protocol::packets::OkPacket {
        status: status::AUTOCOMMIT,
        info: info.as_bytes(),
        ..Default::default()
    };
    sextant_protocol::packets::write_ok(out, 1, &ok, false);
}

fn write_error(out: &mut Vec<u8>, e: SessionError) {
    let (code, state, msg) = e.mysql();
    write_err(out, 1, code, state, &msg);
}

/// The admin port's KILL: of a session here, or forwarded to the instance
/// of the fleet holding it. `as_user`: another instance forwarding its
/// client's KILL; the session must be that user's, or the user must have
/// connection_admin (checked here, where the session is).
async fn kill(
    shared: &Shared,
    id: u32,
    query_only: bool,
    as_user: Option<&str>,
) -> Result<(), SessionError> {
    if as_user.is_none() {
        if let Some(r) = crate::fleet::remote_kill(shared, id, query_only, None).await {
            return r;
        }
    }
    let h = match as_user {
        None => shared
            .sessions
            .get(id)
            .ok_or(SessionError::NoSuchThread(id as u64))?,
        Some(name) => {
            let user = shared
                .runtime()
                .users
                .get(name)
                .cloned()
                .ok_or(SessionError::KillDenied(id as u64))?;
            match shared.sessions.find(id, &user) {
                crate::kill::Found::Unknown => return Err(SessionError::NoSuchThread(id as u64)),
                crate::kill::Found::NotOwner => return Err(SessionError::KillDenied(id as u64)),
                crate::kill::Found::Session(h) => h,
            }
        }
    };
    crate::kill::kill_running(&h).await;
    if !query_only {
        shared.sessions.hang_up(id);
    }
    tracing::info!(
        session = id,
        query_only,
        by = as_user.unwrap_or("the admin"),
        "killed from the admin port"
    );
    Ok(())
}

/// `SHOW XA`: the distributed transactions sessions are carrying out, and
/// the prepared branches the last recovery pass found and left (another
/// instance's, or one whose resolution failed).
fn xa_table(shared: &Shared) -> sextant_admin::Table {
    let columns = ["gtrid", "state", "groups", "age_ms", "decision", "error"]
        .map(String::from)
        .to_vec();
    let Some(coord) = &shared.xa else {
        return sextant_admin::Table {
            columns,
            rows: Vec::new(),
        };
    };
    let rt = shared.runtime();
    let group = |i: usize| {
        rt.sharding
            .as_ref()
            .map_or_else(|| i.to_string(), |s| s.router.group_name(i).to_string())
    };
    let now = sextant_xa::log::now_ms();
    let decision = |g: &str| match coord.log.committed(g) {
        true => "commit",
        false => "none (rolls back)",
    };
    let mut rows = Vec::new();
    for (gtrid, f) in coord.flights() {
        rows.push(vec![
            Some(gtrid.clone()),
            Some(f.stage.name().to_string()),
            Some(
                f.groups
                    .iter()
                    .map(|&i| group(i))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Some(now.saturating_sub(f.started_ms).to_string()),
            Some(decision(&gtrid).to_string()),
            None,
        ]);
    }
    for d in coord.in_doubt() {
        let ours = d.gtrid.starts_with(coord.owner());
        rows.push(vec![
            Some(d.gtrid.clone()),
            Some(format!("prepared ({})", d.action)),
            Some(format!("{} ({})", group(d.group), d.server)),
            Some(now.saturating_sub(d.seen_ms).to_string()),
            Some(match ours {
                true => decision(&d.gtrid).to_string(),
                false => "another sextant's".to_string(),
            }),
            d.error.clone(),
        ]);
    }
    sextant_admin::Table { columns, rows }
}

/// Each group's `SHOW CREATE TABLE` of a sharded table, from its primary
/// (as the first configured user's server account), compared.
async fn shard_schema(
    shared: &Shared,
    db: &str,
    table: &str,
    groups: &[String],
) -> sextant_admin::Table {
    let rt = shared.runtime();
    let account = rt
        .config
        .users
        .first()
        .and_then(|u| rt.users.get(&u.name))
        .map(|e| (e.backend_user.clone(), e.backend_password.clone()));
    let quote = |s: &str| format!("`{}`", s.replace('`', "``"));
    let sql = format!("SHOW CREATE TABLE {}.{}", quote(db), quote(table));
    let mut defs = Vec::with_capacity(groups.len());
    for g in groups {
        let def = async {
            let (user, password) = account
                .as_ref()
                .ok_or_else(|| "no users configured".to_string())?;
            let group = rt
                .pool
                .groups
                .get(g)
                .ok_or_else(|| "no such group".to_string())?;
            let primary = group
                .primary()
                .ok_or_else(|| "no primary known".to_string())?
                .clone();
            let flavor = sextant_backend::Flavor::new(0, crate::frontend::DEFAULT_CHARSET);
            let mut c = primary
                .acquire(user, password, flavor)
                .await
                .map_err(|e| e.to_string())?;
            let rows = c.query_internal(&sql).await;
            let def: Result<String, String> = match rows {
                Ok(rows) => {
                    primary.release(c);
                    rows.first()
                        .and_then(|r| r.get(1).cloned().flatten())
                        .ok_or_else(|| "no definition returned".to_string())
                }
                Err(e) => {
                    primary.discard(c);
                    Err(e.to_string())
                }
            };
            def
        }
        .await;
        defs.push((g.clone(), def));
    }
    sextant_admin::schema_diff(&defs)
}

/// An admin answer's table as a text result set.
fn write_table(out: &mut Vec<u8>, t: &sextant_admin::Table, deprecate_eof: bool) {
    let cols: Vec<(&str, u8)> = t
        .columns
        .iter()
        .map(|c| (c.as_str(), coltype::VAR_STRING))
        .collect();
    write_text_resultset(out, 1, &cols, &t.rows, deprecate_eof, status::AUTOCOMMIT);
}

/// What a fleet peer's login may run on this admin port: KILL, SHOW
/// SESSIONS, and what client libraries send at connect (variable reads,
/// SET NAMES / autocommit), which change nothing here.
fn peer_may(sql: &str) -> bool {
    let w: Vec<String> = sql
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let second = w.get(1).map(String::as_str).unwrap_or("");
    match w.first().map(String::as_str) {
        Some("KILL") | Some("SELECT") => true,
        Some("SHOW") => w.len() == 2 && second == "SESSIONS",
        Some("SET") => matches!(second, "NAMES" | "CHARACTER") || second.starts_with("AUTOCOMMIT"),
        _ => false,
    }
}
