//! Pooled server connections outlive a server's short wait_timeout: sextant
//! raises their own above the pool's idle timeout, while clients still see
//! the server's default as theirs. (Its own test binary: it lowers the lab
//! primary's global wait_timeout.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::Duration;

/// Puts the server's wait_timeout back when the test ends, however it ends.
struct Restore(u64);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = direct(lab().primary).query_drop(format!("SET GLOBAL wait_timeout = {}", self.0));
    }
}

#[test]
fn pooled_connections_outlive_a_short_server_wait_timeout() {
    let mut d = direct(lab().primary);
    let old: Option<u64> = d.query_first("SELECT @@global.wait_timeout").unwrap();
    let _restore = Restore(old.unwrap_or(28800));
    d.query_drop("SET GLOBAL wait_timeout = 3").unwrap();
    let p = Setup {
        group: "idle_timeout_ms = 30000\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let thread = |c: &mut mysql::Conn| -> u64 {
        c.query_first("SELECT @@pseudo_thread_id").unwrap().unwrap()
    };
    let mut c = p.conn();
    let first = thread(&mut c);
    // The client's own wait_timeout is the server's default, as directly.
    let fresh: Option<u64> = direct(lab().primary)
        .query_first("SELECT @@wait_timeout")
        .unwrap();
    let seen: Option<u64> = c.query_first("SELECT @@wait_timeout").unwrap();
    assert_eq!(seen, fresh);
    assert_eq!(seen, Some(3));
    let rows: Vec<(String, String)> = c.query("SHOW VARIABLES LIKE 'wait_timeout'").unwrap();
    assert_eq!(rows, [("wait_timeout".to_string(), "3".to_string())]);
    drop(c);
    // Idle in the pool past the server's 3 s: still there, the same thread.
    std::thread::sleep(Duration::from_secs(5));
    let mut c = p.conn();
    assert_eq!(thread(&mut c), first, "the pooled connection was closed");
    // A client that sets its own short wait_timeout, then leaves: its
    // setting never stays on the server connection, which the next client
    // gets, still open.
    c.query_drop("SET SESSION wait_timeout = 2").unwrap();
    let own: Option<u64> = c.query_first("SELECT @@wait_timeout").unwrap();
    assert_eq!(own, Some(2));
    c.query_drop("SELECT 1").unwrap();
    drop(c);
    std::thread::sleep(Duration::from_secs(4));
    let mut c = p.conn();
    assert_eq!(
        thread(&mut c),
        first,
        "the client's wait_timeout stayed on the connection"
    );
    let seen: Option<u64> = c.query_first("SELECT @@wait_timeout").unwrap();
    assert_eq!(seen, Some(3), "another client's setting did not carry over");
}
