//! sextant-loadgen: N client connections, each running sysbench-style point
//! selects (`SELECT c FROM sbtestT WHERE id = K`, text protocol) in a loop,
//! all on one thread. sysbench needs an OS thread per connection, and at
//! 1,000 threads and more its own CPU per query grows four-fold on a small
//! machine; this client's does not, so it shows how the server side holds
//! up with thousands of active connections.
//!
//!   sextant-loadgen --port P --connections N --seconds S
//!                   [--user app --password apppass --db sbtest --tables 4 --table-size 100000]
//!
//! `--pipeline K` sends K statements in one write before reading their K
//! answers (the protocol allows it: the server answers in order); it
//! measures what a server saves when statements arrive together.
//!
//! `--write-percent P` adds writer connections (`--writers`, default 4)
//! of the same user, updating rows (`UPDATE sbtestT SET k = k + 1 WHERE
//! id = K`) so that P% of all statements are writes: the shape of an
//! application whose reads follow its own writes (read_your_writes).
//! The share holds both ways: writers wait while writes are ahead of it,
//! readers while writes are behind it by more than the writers have in
//! flight. (Without the second, a primary too busy for its writes lowered
//! the share: the reads of two runs then came with different writes.)
//!
//! Prints one line of JSON: queries (reads), writes, errors, qps (reads
//! per second), p50/p95/p99 of the reads in ms.

use sextant_protocol::auth::native_scramble;
use sextant_protocol::codec::{parse_header, write_packet, HEADER_LEN};
use sextant_protocol::consts::cap;
use sextant_protocol::handshake::{HandshakeResponse, InitialHandshake};
use sextant_protocol::tracker::{Expect, Tracker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// N client connections running point selects from one thread.
#[derive(clap::Parser)]
#[command(name = "sextant-loadgen")]
struct Args {
    /// The port of sextant (or a server) on 127.0.0.1.
    #[arg(long)]
    port: u16,
    #[arg(long, default_value_t = 16)]
    connections: usize,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value = "app")]
    user: String,
    #[arg(long, default_value = "apppass")]
    password: String,
    #[arg(long, default_value = "sbtest")]
    db: String,
    #[arg(long, default_value_t = 4)]
    tables: u32,
    #[arg(long, default_value_t = 100_000)]
    table_size: u32,
    /// Statements sent in one write before their answers are read.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pipeline: u64,
    /// Percent of all statements that are writes, from writer connections.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..100))]
    write_percent: u64,
    /// Writer connections (with --write-percent).
    #[arg(long, default_value_t = 4)]
    writers: usize,
}

/// Reads and writes done so far, for the writers' share.
#[derive(Default)]
struct Done {
    reads: std::sync::atomic::AtomicU64,
    writes: std::sync::atomic::AtomicU64,
}

type Io<T> = std::io::Result<T>;

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// Reads one packet into `buf` (cleared first); returns its sequence id.
async fn read_packet(s: &mut TcpStream, buf: &mut Vec<u8>) -> Io<u8> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).await?;
    let h = parse_header(&h).ok_or_else(|| bad("bad packet header"))?;
    buf.clear();
    buf.resize(h.len, 0);
    s.read_exact(buf).await?;
    Ok(h.seq)
}

async fn login(a: &Args) -> Io<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", a.port)).await?;
    s.set_nodelay(true)?;
    let mut buf = Vec::new();
    let seq = read_packet(&mut s, &mut buf).await?;
    let hs = InitialHandshake::parse(&buf).map_err(|e| bad(&e.to_string()))?;
    let resp = HandshakeResponse {
        zstd_level: 0,
        mariadb_caps: 0,
        capabilities: cap::LONG_PASSWORD
            | cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::TRANSACTIONS
            | cap::CONNECT_WITH_DB,
        max_packet: 1 << 24,
        charset: 45,
        user: a.user.clone(),
        auth_response: native_scramble(a.password.as_bytes(), &hs.nonce),
        database: Some(a.db.clone()),
        auth_plugin: Some("mysql_native_password".into()),
        attrs: vec![],
    };
    let mut payload = Vec::new();
    resp.encode(&mut payload);
    let mut out = Vec::new();
    write_packet(&mut out, seq.wrapping_add(1), &payload);
    s.write_all(&out).await?;
    read_packet(&mut s, &mut buf).await?;
    match buf.first() {
        Some(0x00) => Ok(s),
        _ => Err(bad(&format!(
            "login refused: {}",
            String::from_utf8_lossy(buf.get(9..).unwrap_or_default())
        ))),
    }
}

/// Reads one statement's whole answer; true if it was an error packet.
async fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Io<bool> {
    let mut tr = Tracker::new(Expect::Query, false);
    let mut error = false;
    while !tr.is_done() {
        read_packet(s, buf).await?;
        error |= buf.first() == Some(&0xff) && !tr.started();
        tr.feed(buf.len(), buf)
            .map_err(|_| bad("the answer breaks the protocol"))?;
    }
    Ok(error)
}

/// Runs point selects until `until`; returns latencies in microseconds and
/// the number of errors.
async fn client(
    a: std::sync::Arc<Args>,
    done: std::sync::Arc<Done>,
    until: Instant,
    seed: u64,
) -> (Vec<u32>, u64) {
    let mut lat = Vec::with_capacity(1 << 14);
    let mut errors = 0;
    // A connection that cannot log in within 10 s counts as an error
    // rather than holding up the whole run.
    let mut s = match tokio::time::timeout(Duration::from_secs(10), login(&a)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            eprintln!("loadgen: {e}");
            return (lat, 1);
        }
        Err(_) => {
            eprintln!("loadgen: no login within 10 s");
            return (lat, 1);
        }
    };
    let mut rng = seed | 1;
    let mut out = Vec::with_capacity(128);
    let mut buf = Vec::with_capacity(256);
    'run: while Instant::now() < until {
        if writes_behind(&a, &done) {
            tokio::time::sleep(Duration::from_micros(200)).await;
            continue;
        }
        out.clear();
        for _ in 0..a.pipeline {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let table = rng % a.tables as u64 + 1;
            let id = (rng >> 16) % a.table_size as u64 + 1;
            let mut q = Vec::with_capacity(64);
            q.push(0x03);
            q.extend_from_slice(format!("SELECT c FROM sbtest{table} WHERE id={id}").as_bytes());
            write_packet(&mut out, 0, &q);
        }
        let t = Instant::now();
        if s.write_all(&out).await.is_err() {
            errors += 1;
            break;
        }
        for _ in 0..a.pipeline {
            match read_answer(&mut s, &mut buf).await {
                Ok(error) => {
                    errors += u64::from(error);
                    lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    done.reads
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(_) => {
                    errors += 1;
                    break 'run;
                }
            }
        }
    }
    (lat, errors)
}

/// Whether writes are behind their share by more than the writers can
/// have in flight (every writer busy, the share still not met): readers
/// wait for them.
fn writes_behind(a: &Args, done: &Done) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    if a.write_percent == 0 || a.writers == 0 {
        return false;
    }
    let (r, w) = (done.reads.load(Relaxed), done.writes.load(Relaxed));
    // In hundredths of a statement.
    (r + w) * a.write_percent > (w + a.writers as u64) * 100
}

/// Updates rows while writes are below `write_percent` of all statements;
/// returns the number of errors.
async fn writer(
    a: std::sync::Arc<Args>,
    done: std::sync::Arc<Done>,
    until: Instant,
    seed: u64,
) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    let mut s = match tokio::time::timeout(Duration::from_secs(10), login(&a)).await {
        Ok(Ok(s)) => s,
        _ => return 1,
    };
    let (mut rng, mut errors) = (seed | 1, 0);
    let mut out = Vec::with_capacity(128);
    let mut buf = Vec::with_capacity(256);
    while Instant::now() < until {
        let (r, w) = (done.reads.load(Relaxed), done.writes.load(Relaxed));
        if w * 100 >= (r + w) * a.write_percent {
            tokio::time::sleep(Duration::from_micros(500)).await;
            continue;
        }
        done.writes.fetch_add(1, Relaxed);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let table = rng % a.tables as u64 + 1;
        let id = (rng >> 16) % a.table_size as u64 + 1;
        let mut q = vec![0x03];
        q.extend_from_slice(format!("UPDATE sbtest{table} SET k = k + 1 WHERE id={id}").as_bytes());
        out.clear();
        write_packet(&mut out, 0, &q);
        if s.write_all(&out).await.is_err() {
            return errors + 1;
        }
        match read_answer(&mut s, &mut buf).await {
            Ok(error) => errors += u64::from(error),
            Err(_) => return errors + 1,
        }
    }
    errors
}

fn main() {
    let a = std::sync::Arc::new(<Args as clap::Parser>::parse());
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sextant-loadgen: {e}");
            std::process::exit(1);
        }
    };
    let (mut lat, errors, writes, elapsed) = rt.block_on(async {
        let start = Instant::now();
        let until = start + Duration::from_secs(a.seconds);
        let done = std::sync::Arc::new(Done::default());
        let writers = if a.write_percent > 0 { a.writers } else { 0 };
        let writers: Vec<_> = (0..writers)
            .map(|i| {
                tokio::spawn(writer(
                    a.clone(),
                    done.clone(),
                    until,
                    0x5851_f42d ^ i as u64,
                ))
            })
            .collect();
        let tasks: Vec<_> = (0..a.connections)
            .map(|i| {
                tokio::spawn(client(
                    a.clone(),
                    done.clone(),
                    until,
                    0x9e37_79b9_7f4a_7c15 ^ i as u64,
                ))
            })
            .collect();
        let mut lat = Vec::new();
        let mut errors = 0;
        for t in tasks {
            if let Ok((l, e)) = t.await {
                lat.extend(l);
                errors += e;
            }
        }
        for t in writers {
            errors += t.await.unwrap_or(1);
        }
        let writes = done.writes.load(std::sync::atomic::Ordering::Relaxed);
        (lat, errors, writes, start.elapsed())
    });
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |&us| us as f64 / 1000.0)
    };
    println!(
        "{{\"connections\": {}, \"queries\": {}, \"writes\": {}, \"errors\": {}, \"qps\": {:.1}, \"p50_ms\": {:.3}, \"p95_ms\": {:.3}, \"p99_ms\": {:.3}}}",
        a.connections,
        lat.len(),
        writes,
        errors,
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.95),
        pct(0.99)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_wait_only_when_writes_are_behind_by_more_than_the_writers() {
        let a = <Args as clap::Parser>::parse_from([
            "loadgen",
            "--port",
            "1",
            "--write-percent",
            "10",
            "--writers",
            "4",
        ]);
        let done = |r: u64, w: u64| Done {
            reads: r.into(),
            writes: w.into(),
        };
        // (reads, writes, readers wait)
        for (r, w, wait) in [
            (0, 0, false),
            (90, 10, false),
            // 10% of 104 is 10.4: 6.4 behind, more than 4 in flight.
            (100, 4, true),
            (94, 6, false),
            // 10% of 1,100 is 110: 10 behind.
            (1000, 100, true),
            // 10% of 1,108 is 110.8: 2.8 behind.
            (1000, 108, false),
            (1000, 200, false),
        ] {
            assert_eq!(
                writes_behind(&a, &done(r, w)),
                wait,
                "{r} reads, {w} writes"
            );
        }
        let none = <Args as clap::Parser>::parse_from(["loadgen", "--port", "1"]);
        assert!(!writes_behind(&none, &done(1000, 0)));
    }
}
