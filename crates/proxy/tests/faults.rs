//! Bad input and failures: every client that is still there gets a MySQL
//! error packet, everyone else keeps being served, and no server connection
//! in an unknown state goes back to the pool.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn still_serving(p: &Proxy) {
    let mut c = p.conn();
    let v: Option<i32> = c.query_first("SELECT 41 + 1").unwrap();
    assert_eq!(v, Some(42));
}

#[test]
fn malformed_out_of_order_and_unknown_commands() {
    let p = Setup::default().start();
    // A truncated COM_STMT_EXECUTE: 1835, then the connection is closed.
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.send(0, &[0x17, 1]);
    let (_, e) = r.read().expect("error packet");
    assert_eq!(err_of(&e).0, 1835);
    assert!(r.read().is_none(), "connection should be closed");

    // A command with sequence id 3: 1156.
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.send(3, b"\x03SELECT 1");
    let (_, e) = r.read().expect("error packet");
    let (code, msg) = err_of(&e);
    assert_eq!(code, 1156, "{msg}");
    assert!(r.read().is_none());

    // An unknown command: 1047, and the session goes on.
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.send(0, &[0x1d]);
    let (_, e) = r.read().expect("error packet");
    assert_eq!(err_of(&e).0, 1047);
    r.query("SELECT 5");
    let resp = r.read_response();
    assert_eq!(resp[3], b"\x015");

    // Unknown statement ids: 1243.
    let mut q = vec![0x17];
    q.extend_from_slice(&999u32.to_le_bytes());
    q.extend_from_slice(&[0, 1, 0, 0, 0]);
    r.send(0, &q);
    let (_, e) = r.read().expect("error packet");
    assert_eq!(err_of(&e).0, 1243);
    still_serving(&p);
}

#[test]
fn packets_over_max_allowed_packet() {
    let p = Setup {
        proxy: "max_allowed_packet = 1048576",
        ..Default::default()
    }
    .start();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    let mut q = b"\x03SELECT '".to_vec();
    q.extend(std::iter::repeat_n(b'a', 2 << 20));
    q.push(b'\'');
    r.send(0, &q);
    let (_, e) = r.read().expect("error packet");
    let (code, msg) = err_of(&e);
    assert_eq!(code, 1153, "{msg}");
    assert!(msg.contains("max_allowed_packet"), "{msg}");
    still_serving(&p);
}

#[test]
fn silent_clients_time_out_without_blocking_others() {
    let p = Setup {
        proxy: "handshake_timeout_ms = 300",
        ..Default::default()
    }
    .start();
    let mut silent: Vec<Raw> = (0..20).map(|_| Raw::connect(p.port)).collect();
    still_serving(&p);
    for r in &mut silent {
        let (seq, greeting) = r.read().expect("greeting");
        assert_eq!((seq, greeting[0]), (0, 10));
        let (_, e) = r.read().expect("error after the timeout");
        assert_eq!(err_of(&e).0, 1043);
        assert!(r.read().is_none());
    }
}

#[test]
fn client_vanishing_mid_result_frees_the_server_connection() {
    let p = Setup::default().start();
    let before = p.backends_sum("conn_open");
    {
        let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
        r.query("SELECT seq, REPEAT('x', 200) FROM seq_1_to_3000000");
        for _ in 0..100 {
            r.read().expect("rows");
        }
    } // dropped mid-result
      // The connection that was streaming is closed, not pooled.
    wait_until("the abandoned server connection to be closed", || {
        p.backends_sum("conn_used") == 0
    });
    let open = p.backends_sum("conn_open");
    assert!(open <= before + 1, "connections leaked: {before} -> {open}");
    // The server stopped working on it.
    wait_until("the server to abandon the query", || {
        lab().replicas.iter().chain([&lab().primary]).all(|&port| {
            let mut d = direct(port);
            let n: Option<i64> = d
                .query_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%seq_1_to_3000000%' AND ID <> CONNECTION_ID()")
                .unwrap();
            n == Some(0)
        })
    });
    still_serving(&p);
}

#[test]
fn server_connection_killed_mid_result() {
    let p = Setup::default().start();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.query("SELECT seq, REPEAT('y', 200) FROM seq_1_to_4000000");
    for _ in 0..50 {
        r.read().expect("rows");
    }
    // Kill the server thread running it, wherever it runs.
    let mut killed = false;
    for &port in lab().replicas.iter().chain([&lab().primary]) {
        let mut d = direct(port);
        let ids: Vec<u64> = d
            .query("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%seq_1_to_4000000%' AND ID <> CONNECTION_ID()")
            .unwrap();
        for id in ids {
            d.query_drop(format!("KILL {id}")).unwrap();
            killed = true;
        }
    }
    assert!(killed, "the query was not found on any server");
    // The client gets an error packet (the server's, or sextant's 9003)...
    let err = loop {
        let (_, pk) = r.read().expect("an error packet, not a dropped connection");
        if pk[0] == 0xff {
            break err_of(&pk);
        }
    };
    assert!([1927, 9003].contains(&err.0), "{err:?}");
    // ...and its session goes on.
    r.query("SELECT 6");
    let resp = r.read_response();
    assert_eq!(resp[3], b"\x016");
    wait_until("no connection in use", || p.backends_sum("conn_used") == 0);
    // Many statements later, nobody got the dead connection.
    let mut c = p.conn();
    for i in 0..50 {
        let v: Option<i32> = c.query_first(format!("SELECT {i}")).unwrap();
        assert_eq!(v, Some(i));
    }
}

#[test]
fn primary_down_reads_still_work_and_writes_fail_clearly() {
    // A proxy whose primary is a closed port.
    let dead = free_port();
    let p = Setup {
        group: "connect_timeout_ms = 500\n",
        primary: Some(dead),
        ..Default::default()
    }
    .start();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.query("SELECT 8");
    let resp = r.read_response();
    assert_eq!(
        resp[3], b"\x018",
        "a read must not fail while replicas are up"
    );
    let t = Instant::now();
    r.query("CREATE DATABASE IF NOT EXISTS never");
    let resp = r.read_response();
    let (code, msg) = err_of(&resp[0]);
    assert_eq!(code, 9001, "{msg}");
    assert!(msg.contains(&format!("127.0.0.1:{dead}")), "{msg}");
    assert!(t.elapsed() < Duration::from_secs(5));
    r.query("SELECT 9");
    assert_eq!(r.read_response()[3], b"\x019");
}

#[test]
fn full_pool_makes_statements_wait_then_fail() {
    let p = Setup {
        group: "pool_max = 1\npool_wait_ms = 300\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut a = p.conn();
    a.query_drop("CREATE TABLE IF NOT EXISTS pool_t (id int primary key)")
        .unwrap();
    a.query_drop("BEGIN").unwrap();
    a.query_drop("INSERT INTO pool_t VALUES (1) ON DUPLICATE KEY UPDATE id = id")
        .unwrap();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    let t = Instant::now();
    r.query("INSERT INTO sextant_test.pool_t VALUES (2) ON DUPLICATE KEY UPDATE id = id");
    let resp = r.read_response();
    let (code, msg) = err_of(&resp[0]);
    assert_eq!(code, 9001, "{msg}");
    assert!(msg.contains("pool is full"), "{msg}");
    assert!(t.elapsed() >= Duration::from_millis(250));
    a.query_drop("COMMIT").unwrap();
    r.query("INSERT INTO sextant_test.pool_t VALUES (2) ON DUPLICATE KEY UPDATE id = id");
    assert_eq!(r.read_response()[0][0], 0);
}

#[test]
fn reads_survive_a_replica_dying_mid_session() {
    let lab = lab();
    let fwd = Forwarder::start(lab.replicas[0]);
    let p = Setup {
        group: "connect_timeout_ms = 300\n[routing]\nhold_ms = 0\n",
        replicas_override: Some(vec![fwd.port, lab.replicas[1]]),
        ..Default::default()
    }
    .start();
    // Several clients keep connections to both replicas pooled.
    let mut clients: Vec<_> = (0..4).map(|_| p.conn()).collect();
    for i in 0..200 {
        let c = &mut clients[i % 4];
        let v: Option<i64> = c.query_first(format!("SELECT {i}")).unwrap();
        assert_eq!(v, Some(i as i64));
    }
    // The replica dies: pooled connections to it fail at the next
    // statement, new ones are refused. No read may fail.
    fwd.cut();
    for i in 0..400 {
        let c = &mut clients[i % 4];
        let v: Option<i64> = c
            .query_first(format!("SELECT {i}"))
            .unwrap_or_else(|e| panic!("read {i} failed after the replica died: {e}"));
        assert_eq!(v, Some(i as i64));
    }
    let mut a = p.admin();
    let rows: Vec<mysql::Row> = a.query("SHOW BACKENDS").unwrap();
    let dead = rows
        .iter()
        .find(|r| {
            r.get::<String, _>("address")
                .unwrap()
                .ends_with(&format!(":{}", fwd.port))
        })
        .unwrap();
    assert_eq!(dead.get::<String, _>("state").unwrap(), "down");
}

#[test]
fn a_transaction_whose_server_dies_gets_a_clear_error_and_the_session_goes_on() {
    let p = Setup::default().start();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS txd_t (id int primary key)")
        .unwrap();
    c.query_drop("DELETE FROM txd_t").unwrap();
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO txd_t VALUES (1)").unwrap();
    let backend_id: u64 = c.query_first("SELECT @@pseudo_thread_id").unwrap().unwrap();
    // The server side of the transaction's connection dies.
    direct(lab().primary)
        .query_drop(format!("KILL {backend_id}"))
        .unwrap();
    let e = c
        .query_drop("INSERT INTO txd_t VALUES (2)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("9003") || e.contains("1927"), "{e}");
    // The session is usable, the transaction is gone (nothing committed),
    // and the failed statement was not run again.
    let n: Option<i64> = c
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM txd_t")
        .unwrap();
    assert_eq!(n, Some(0));
    c.query_drop("INSERT INTO txd_t VALUES (3)").unwrap();
    let n: Option<i64> = c
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM txd_t")
        .unwrap();
    assert_eq!(n, Some(1));
}

/// A client that has not logged in cannot make sextant hold memory: a
/// header announcing a 16 MiB login packet is refused at once (1043, not
/// after the handshake timeout with the buffer held meanwhile), and fifty
/// such connections leave sextant's memory where it was.
#[test]
fn announced_huge_login_packets_are_refused_before_buffering() {
    let p = Setup::default().start();
    still_serving(&p);
    let before = p.rss_kib();
    let started = std::time::Instant::now();
    let mut conns = Vec::new();
    for _ in 0..50 {
        let mut r = Raw::connect(p.port);
        r.read().expect("greeting");
        // seq 1, length 0xfffffe: a login packet of 16 MiB - 2.
        r.send_raw(&[0xfe, 0xff, 0xff, 1]);
        conns.push(r);
    }
    for r in &mut conns {
        let (_, e) = r.read().expect("an error, not silence");
        let (code, msg) = err_of(&e);
        assert_eq!(code, 1043, "{msg}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "refused only after {:?} (the handshake timeout is 10 s)",
        started.elapsed()
    );
    let grown_mib = p.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "sextant grew {grown_mib} MiB for 50 announced packets"
    );
    still_serving(&p);
}

/// The admin port has the proxy port's handshake timeout, and a failed
/// admin login is logged.
#[test]
fn admin_port_logins_time_out_and_failures_are_logged() {
    let p = Setup {
        proxy: "handshake_timeout_ms = 300",
        ..Default::default()
    }
    .start();
    let mut silent = Raw::connect(p.admin_port);
    silent.read().expect("greeting");
    let started = std::time::Instant::now();
    let (_, e) = silent.read().expect("an error after the timeout");
    let (code, msg) = err_of(&e);
    assert_eq!(code, 1043, "{msg}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(silent.read().is_none(), "the connection stays open");
    let bad = mysql::Conn::new(
        mysql::Opts::from_url(&format!(
            "mysql://admin:wrong@127.0.0.1:{}/?prefer_socket=false",
            p.admin_port
        ))
        .unwrap(),
    );
    assert!(bad.is_err());
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        p.logs().contains("admin login failed"),
        "no log line for a failed admin login"
    );
}

/// A session holds no memory for a large statement once it is done.
#[test]
fn memory_of_a_large_statement_is_given_back() {
    let p = Setup::default().start();
    still_serving(&p);
    let before = p.rss_kib();
    let mut conns: Vec<mysql::Conn> = (0..8).map(|_| p.conn()).collect();
    let big = format!("SELECT LENGTH('{}')", "a".repeat(6 << 20));
    for c in &mut conns {
        let n: Option<u64> = c.query_first(&big).unwrap();
        assert_eq!(n, Some(6 << 20));
    }
    // Eight idle sessions now; each read, copied and sent 6 MiB. (The
    // allocator is asked to give freed memory back within 100 ms.)
    std::thread::sleep(std::time::Duration::from_millis(300));
    let grown_mib = p.rss_kib().saturating_sub(before) / 1024;
    eprintln!("8 idle sessions hold {grown_mib} MiB after a 6 MiB statement each");
    assert!(
        grown_mib < 40,
        "8 idle sessions hold {grown_mib} MiB after a 6 MiB statement each"
    );
    still_serving(&p);
}

/// A session may hold max_prepared_statements prepared statements; one
/// more gets the server's own error for it (1461), and closing one makes
/// room.
#[test]
fn prepared_statements_per_session_are_capped() {
    let p = Setup {
        proxy: "max_prepared_statements = 10",
        ..Default::default()
    }
    .start();
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    let prepare = |r: &mut Raw, i: usize| -> Vec<u8> {
        let mut q = vec![0x16];
        q.extend_from_slice(format!("SELECT ? + {i}").as_bytes());
        r.send(0, &q);
        let resp = r.read_response_as(sextant_protocol::tracker::Expect::Prepare);
        resp[0].clone()
    };
    let mut ids = Vec::new();
    for i in 0..10 {
        let ok = prepare(&mut r, i);
        assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
        ids.push(u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]));
    }
    let e = prepare(&mut r, 10);
    let (code, msg) = err_of(&e);
    assert_eq!(code, 1461, "{msg}");
    let mut close = vec![0x19];
    close.extend_from_slice(&ids[0].to_le_bytes());
    r.send(0, &close);
    let ok = prepare(&mut r, 11);
    assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
}

/// A session idle inside a transaction past idle_in_transaction_timeout_ms
/// is told why (4031, sequence 0, as MySQL's own) and closed; its
/// transaction is rolled back, and its server connection is free again.
/// Outside a transaction, idling is fine.
#[test]
fn sessions_idle_in_a_transaction_are_ended() {
    let p = Setup {
        proxy: "idle_in_transaction_timeout_ms = 300",
        group: "pool_max = 1\n",
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let mut setup = p.conn();
    setup
        .query_drop("CREATE TABLE IF NOT EXISTS idle_trx (id int primary key)")
        .unwrap();
    setup.query_drop("DELETE FROM idle_trx").unwrap();
    drop(setup);
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    r.query("BEGIN");
    assert_eq!(r.read_response()[0][0], 0);
    r.query("INSERT INTO idle_trx VALUES (1)");
    assert_eq!(r.read_response()[0][0], 0);
    let started = std::time::Instant::now();
    let (seq, e) = r.read().expect("an error when the timeout passes");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_eq!(seq, 0);
    let (code, msg) = err_of(&e);
    assert_eq!(code, 4031, "{msg}");
    assert!(r.read().is_none(), "the session stays open");
    // The only server connection is free again, and the row is gone.
    let mut c = p.conn();
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM idle_trx").unwrap();
    assert_eq!(n, Some(0));
    std::thread::sleep(std::time::Duration::from_millis(600));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM idle_trx").unwrap();
    assert_eq!(
        n,
        Some(0),
        "an idle session outside a transaction was ended"
    );
}

/// A user's max_connections: one session more gets 1226, as from a
/// server's max_user_connections; a session that leaves makes room.
#[test]
fn per_user_connection_limit() {
    let p = Setup {
        users: "[[users]]\nname = \"lim\"\npassword = \"lp\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\nmax_connections = 2\n",
        ..Default::default()
    }
    .start();
    let open =
        || mysql::Conn::new(mysql::Opts::from_url(&p.url("lim", "lp", "sextant_test")).unwrap());
    let a = open().expect("first");
    let _b = open().expect("second");
    let e = open().expect_err("a third session");
    assert!(e.to_string().contains("1226"), "{e}");
    // Other users are not limited by it.
    still_serving(&p);
    drop(a);
    std::thread::sleep(std::time::Duration::from_millis(200));
    open().expect("room after one left");
}

/// max_connections never promises more clients than the file descriptor
/// limit can hold: with 200 descriptors, clients beyond what fits get 1040
/// at once instead of waiting in the accept queue, and sextant goes on
/// serving.
#[test]
fn max_connections_fits_the_descriptor_limit() {
    let p = Setup {
        group: "pool_max = 4\n",
        nofile: Some(200),
        ..Default::default()
    }
    .start();
    assert!(p
        .logs()
        .contains("does not fit in the file descriptor limit"));
    let mut conns = Vec::new();
    let (mut greeted, mut refused) = (0, 0);
    for _ in 0..250 {
        let r = Raw::connect(p.port);
        r.s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        conns.push(r);
    }
    for r in &mut conns {
        let (_, first) = r.read().expect("a greeting or an error, not silence");
        match first[0] {
            0x0a => greeted += 1,
            0xff => {
                let (code, msg) = err_of(&first);
                assert_eq!(code, 1040, "{msg}");
                refused += 1;
            }
            other => panic!("unexpected first packet {other:#x}"),
        }
    }
    assert!(
        refused > 0 && greeted <= 200 - 15 - 64,
        "{greeted} greeted, {refused} refused"
    );
    drop(conns);
    std::thread::sleep(std::time::Duration::from_millis(300));
    still_serving(&p);
}

fn login_error(port: u16, user: &str, pass: &str) -> Option<u16> {
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(pass))
        .prefer_socket(false);
    match mysql::Conn::new(opts) {
        Ok(_) => None,
        Err(mysql::Error::MySqlError(e)) => Some(e.code),
        Err(e) => panic!("login to {port}: {e}"),
    }
}

/// Failed logins in a row lock the source address out, on the client and
/// admin ports alike: then even the right password gets 1129, until the
/// lockout ends. A successful login starts the count again.
#[test]
fn failed_logins_lock_the_address_out() {
    let p = Setup {
        proxy: "max_failed_logins = 5\nfailed_login_lockout_ms = 1500",
        ..Default::default()
    }
    .start();
    for (port, user, pass) in [
        (p.port, "app", "apppass"),
        (p.admin_port, "admin", "adminpass"),
    ] {
        for _ in 0..4 {
            assert_eq!(login_error(port, user, "wrong"), Some(1045));
        }
        // Four failures, then a success: the count starts again.
        assert_eq!(login_error(port, user, pass), None, "port {port}");
        for _ in 0..4 {
            assert_eq!(login_error(port, "nobody", "wrong"), Some(1045));
        }
        assert_eq!(login_error(port, user, "wrong"), Some(1045));
        assert_eq!(
            login_error(port, user, pass),
            Some(1129),
            "port {port}: the right password while locked out"
        );
    }
    assert!(
        p.logs().contains("locked out"),
        "no log line for the lockout"
    );
    std::thread::sleep(std::time::Duration::from_millis(1600));
    assert_eq!(
        login_error(p.port, "app", "apppass"),
        None,
        "after the lockout"
    );
    assert_eq!(login_error(p.admin_port, "admin", "adminpass"), None);
}

/// One login attempt by hand: the reply to the handshake response.
fn attempt(port: u16, user: &str, pass: &str, plugin: &str) -> (Vec<u8>, std::time::Duration) {
    let mut r = Raw::connect(port);
    let (_, greeting) = r.read().expect("greeting");
    let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting).expect("greeting");
    let resp = sextant_protocol::handshake::HandshakeResponse {
        zstd_level: 0,
        mariadb_caps: 0,
        capabilities: CAPS,
        max_packet: 1 << 24,
        charset: 45,
        user: user.into(),
        auth_response: sextant_protocol::auth::native_scramble(pass.as_bytes(), &hs.nonce),
        database: None,
        auth_plugin: Some(plugin.into()),
        attrs: vec![],
    };
    let mut p = Vec::new();
    resp.encode(&mut p);
    let started = std::time::Instant::now();
    r.send(1, &p);
    let (_, reply) = r.read().expect("a reply");
    (reply, started.elapsed())
}

/// An unknown user cannot be told from a known one with a wrong password:
/// the same packets (an auth switch when the client names another plugin,
/// then 1045) and the same time to answer (medians of interleaved tries).
#[test]
fn unknown_users_are_answered_like_wrong_passwords() {
    let p = Setup {
        proxy: "max_failed_logins = 0",
        ..Default::default()
    }
    .start();
    let (known, _) = attempt(p.port, "app", "wrong", "dialog");
    let (unknown, _) = attempt(p.port, "nobody", "wrong", "dialog");
    assert_eq!(known[0], 0xfe, "auth switch for a known user");
    assert_eq!(unknown[0], 0xfe, "auth switch for an unknown user");
    let (mut k, mut u) = (Vec::new(), Vec::new());
    // In random order: sextant hands connections to its worker threads in
    // turn, and a fixed order would put each kind on one thread.
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    while k.len() < 300 || u.len() < 300 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (user, times) = if rng & 1 == 0 {
            ("app", &mut k)
        } else {
            ("nobody", &mut u)
        };
        let (reply, t) = attempt(p.port, user, "wrong", "mysql_native_password");
        assert_eq!(err_of(&reply).0, 1045);
        times.push(t);
    }
    k.sort();
    u.sort();
    let (km, um) = (k[k.len() / 2], u[u.len() / 2]);
    let ratio = um.as_secs_f64() / km.as_secs_f64();
    assert!(
        (0.8..1.25).contains(&ratio),
        "unknown user {um:?} vs wrong password {km:?} (median)"
    );
}
