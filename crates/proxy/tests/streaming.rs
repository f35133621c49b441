//! Results stream through sextant: a 1 GB result passes with sextant's
//! memory flat, and a client that stops reading stops the server instead
//! of filling sextant's memory.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::Duration;

const GIGABYTE_QUERY: &str = "SELECT REPEAT('x', 1000) FROM seq_1_to_1000000";

#[test]
fn one_gigabyte_result_with_flat_memory() {
    let p = Setup::default().start();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.query("SELECT 1");
    r.read_response();
    let peak_before = p.peak_rss_kib();
    r.query(GIGABYTE_QUERY);
    let (packets, bytes) = r.drain_result();
    let peak_after = p.peak_rss_kib();
    assert_eq!(packets, 1_000_000 + 4, "count, definition, EOF, rows, EOF");
    assert!(bytes > 1_000_000_000);
    let grew_mib = (peak_after.saturating_sub(peak_before)) as f64 / 1024.0;
    eprintln!(
        "1 GB result: sextant peak RSS {:.1} -> {:.1} MiB",
        peak_before as f64 / 1024.0,
        peak_after as f64 / 1024.0
    );
    assert!(
        grew_mib < 32.0,
        "peak RSS grew by {grew_mib:.1} MiB while relaying 1 GB"
    );
    // The session and connection are fine afterwards.
    r.query("SELECT 2");
    assert_eq!(r.read_response()[3], b"\x012");
}

#[test]
fn slow_client_holds_back_the_server() {
    let p = Setup::default().start();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.query("SELECT 1");
    r.read_response();
    let rss_before = p.rss_kib();
    r.query(&GIGABYTE_QUERY.replace("1000000", "1000001"));
    for _ in 0..1000 {
        r.read().expect("rows");
    }
    // Stop reading. The server must be held back (its query still
    // sending), and sextant must not buffer what the client does not take.
    let mut max_rss = 0;
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(500));
        max_rss = max_rss.max(p.rss_kib());
    }
    let running = lab().replicas.iter().chain([&lab().primary]).any(|&port| {
        let n: Option<i64> = direct(port)
            .query_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%seq_1_to_1000001%' AND ID <> CONNECTION_ID()")
            .unwrap();
        n == Some(1)
    });
    assert!(
        running,
        "the server finished a 1 GB result the client did not read: something buffered it"
    );
    let grew_mib = max_rss.saturating_sub(rss_before) as f64 / 1024.0;
    eprintln!("stalled client: sextant RSS grew {grew_mib:.1} MiB");
    assert!(
        grew_mib < 32.0,
        "sextant RSS grew by {grew_mib:.1} MiB for a stalled client"
    );
}
