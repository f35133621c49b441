//! The HTTP port (`[admin] http_listen`): what monitoring systems and a
//! browser read. Everything is a GET and nothing changes state (changes go
//! through the admin port, which has a login):
//!
//! - `/metrics`: Prometheus text exposition (`sextant_admin::metrics`);
//! - `/healthz`: 200 while the process serves;
//! - `/readyz`: 200 while sextant can serve (some server answers it) and
//!   is not shutting down, naming any group without a reachable primary;
//!   else 503 with the reason;
//! - `/api/backends`, `/api/groups`, `/api/sessions`, `/api/status`, `/api/stats`,
//!   `/api/fleet`: the admin port's tables as JSON;
//! - `/`: the status page (one self-contained HTML file).

use crate::shared::Shared;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

const STATUS_PAGE: &str = include_str!("status.html");

/// Connections the HTTP port serves at once; more are answered 503 and
/// closed (a monitoring system needs a few; thousands are an attack).
const MAX_CONNECTIONS: usize = 256;
/// A request's headers must arrive within this (slowloris).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed this long after it opened, whatever it does
/// (a status page polling over keep-alive just connects again).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Bytes a request may buffer (headers included): every request is a GET.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("http accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "http port full ({MAX_CONNECTIONS} connections): refused");
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let busy = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 31\r\nconnection: close\r\n\r\ntoo many HTTP connections open\n";
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(busy)).await;
            });
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&shared, &req)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_REQUEST_BYTES)
                .serve_connection(io, svc);
            match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                Ok(Err(e)) => tracing::debug!(%peer, "http connection ended: {e}"),
                Ok(Ok(())) => {}
                Err(_) => {
                    tracing::debug!(%peer, "http connection closed after {CONNECTION_LIFETIME:?}")
                }
            }
        });
    }
}

fn answer<B>(shared: &Shared, req: &Request<B>) -> Response<Full<Bytes>> {
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET: changes go through the admin port\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let text = crate::admin_context::with_context(shared, |ctx| {
                sextant_admin::metrics::exposition(&sextant_admin::metrics::collect(ctx))
            });
            reply(StatusCode::OK, "text/plain; version=0.0.4", text)
        }
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => match not_ready(shared) {
            None => {
                let notes: Vec<String> = [crate::fleet::store_note(shared), degraded(shared)]
                    .into_iter()
                    .flatten()
                    .collect();
                let note = match notes.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", notes.join("; ")),
                };
                reply(StatusCode::OK, "text/plain", format!("ready{note}\n"))
            }
            Some(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        "/" | "/index.html" => reply(StatusCode::OK, "text/html; charset=utf-8", STATUS_PAGE.into()),
        path => match path.strip_prefix("/api/").and_then(|p| api(shared, p)) {
            Some(json) => reply(StatusCode::OK, "application/json", json),
            None => reply(
                StatusCode::NOT_FOUND,
                "text/plain",
                "not found; try /metrics, /healthz, /readyz, /api/backends, /api/groups, /api/sessions, /api/status, /api/stats, /api/fleet or /\n".into(),
            ),
        },
    }
}

/// Why sextant should not be given traffic now, if so.
/// Why the instance cannot serve, if it cannot: shutting down, or no
/// server of any group answers it. One group without a primary is not a
/// reason (its reads, and every other group, are still served; SHOW
/// BACKENDS and the metrics say which group is down): a balancer that
/// took every instance out for it would stop all of the fleet's traffic.
fn not_ready(shared: &Shared) -> Option<String> {
    if crate::shutdown::requested() {
        return Some("shutting down".into());
    }
    if shared.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Some("draining: shutting down after drain_delay_ms".into());
    }
    let rt = shared.runtime();
    let any = rt
        .pool
        .groups
        .values()
        .flat_map(|g| g.members.iter())
        .any(|s| s.health.reachable() && !s.health.in_maintenance());
    (!any).then(|| "no server of any group is reachable".into())
}

/// The groups whose primary does not answer, for /readyz's 200 body.
fn degraded(shared: &Shared) -> Option<String> {
    let rt = shared.runtime();
    let missing: Vec<&str> = rt
        .pool
        .groups
        .iter()
        .filter(|(_, g)| {
            !g.primary()
                .is_some_and(|p| p.health.reachable() && !p.health.in_maintenance())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "no reachable primary in group(s) {}: their writes wait or fail, everything else is served",
            missing.join(", ")
        )
    })
}

fn api(shared: &Shared, what: &str) -> Option<String> {
    if what == "accounts" {
        // Which users' server accounts reach too far, not how: the HTTP
        // port asks no password, and what an account can do is worth
        // knowing to whoever means to use it (SHOW ACCOUNTS on the admin
        // port says).
        let rows = match &*shared.accounts.lock() {
            Some(t) => t
                .rows
                .iter()
                .map(|r| {
                    let cell = |i: usize| r.get(i).cloned().flatten();
                    let reach = cell(3).unwrap_or_default();
                    let beyond = if reach == "its own schemas only" {
                        "no"
                    } else if reach.starts_with("grants not read") {
                        "unknown"
                    } else {
                        "yes"
                    };
                    vec![cell(0), Some(beyond.to_string())]
                })
                .collect(),
            None => Vec::new(),
        };
        return Some(table_json(&sextant_admin::Table {
            columns: vec!["user".into(), "beyond_own_schemas".into()],
            rows,
        }));
    }
    if what == "fleet" {
        return Some(match crate::fleet::table(shared) {
            Ok(t) => table_json(&t),
            Err(_) => "[]".into(),
        });
    }
    let command = match what {
        "backends" => "SHOW BACKENDS",
        "groups" => "SHOW GROUPS",
        "sessions" => "SHOW SESSIONS",
        "status" => "SHOW STATUS",
        "stats" => "SHOW STATS",
        _ => return None,
    };
    crate::admin_context::with_context(shared, |ctx| match sextant_admin::execute(command, ctx) {
        sextant_admin::Answer::Table(mut t) => {
            // The HTTP port asks no password: a server thread id is what a
            // KILL run on the server itself would need, so it stays on the
            // admin port.
            if let Some(i) = t.columns.iter().position(|c| c == "server_thread") {
                t.columns.remove(i);
                for r in &mut t.rows {
                    if i < r.len() {
                        r.remove(i);
                    }
                }
            }
            Some(table_json(&t))
        }
        _ => None,
    })
}

/// A table as a JSON array of objects keyed by column.
fn table_json(t: &sextant_admin::Table) -> String {
    let rows: Vec<serde_json::Value> = t
        .rows
        .iter()
        .map(|r| {
            let m: serde_json::Map<String, serde_json::Value> = t
                .columns
                .iter()
                .zip(r)
                .map(|(c, v)| {
                    let v = match v {
                        Some(v) => serde_json::Value::String(v.clone()),
                        None => serde_json::Value::Null,
                    };
                    (c.clone(), v)
                })
                .collect();
            serde_json::Value::Object(m)
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}
