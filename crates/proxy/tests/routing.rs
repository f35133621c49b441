//! Every routing rule against the real lab, asserted by counting what each
//! server executed (its Com_* status counters). Those counters are global,
//! so the tests of this file run one at a time.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Persistent direct connections, so that reading the counters does not
/// itself run SELECTs (a new connection's start-up queries would).
struct Counters {
    conns: Vec<mysql::Conn>,
}

impl Counters {
    fn new() -> Self {
        let lab = lab();
        Counters {
            conns: std::iter::once(lab.primary)
                .chain(lab.replicas.iter().copied())
                .map(direct)
                .collect(),
        }
    }
    /// [primary, replica 1, replica 2]
    fn get(&mut self, name: &str) -> Vec<i64> {
        self.conns
            .iter_mut()
            .map(|c| {
                let r: Option<(String, i64)> = c
                    .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
                    .unwrap();
                r.unwrap().1
            })
            .collect()
    }
    /// Runs `f` and returns how many `name` each server counted meanwhile.
    fn delta(&mut self, name: &str, f: impl FnOnce()) -> Vec<i64> {
        let before = self.get(name);
        f();
        self.get(name)
            .iter()
            .zip(before)
            .map(|(a, b)| a - b)
            .collect()
    }
}

fn reads(c: &mut mysql::Conn, n: usize, sql: &str) {
    for _ in 0..n {
        c.query_drop(sql).unwrap();
    }
}

fn within(got: i64, want: i64, tolerance: i64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, want {want} +/- {tolerance}"
    );
}

const NO_HOLD: &str = "[routing]\nhold_ms = 0\n";

/// Sextant with the lab's group, every statement routed on its own.
fn no_hold_proxy() -> Proxy {
    Setup {
        group: NO_HOLD,
        ..Default::default()
    }
    .start()
}

#[test]
fn reads_go_to_replicas_round_robin_evenly() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    let mut k = Counters::new();
    let d = k.delta("Com_select", || reads(&mut c, 10_000, "SELECT 1"));
    eprintln!("10,000 reads: {d:?}");
    within(d[0], 0, 10, "primary");
    within(d[1], 5000, 500, "replica 1");
    within(d[2], 5000, 500, "replica 2");
}

#[test]
fn writes_transactions_and_locking_reads_go_to_the_primary() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS r_t (id int primary key auto_increment, v int)")
        .unwrap();
    let mut k = Counters::new();
    let d = k.delta("Com_insert", || {
        reads(&mut c, 100, "INSERT INTO r_t (v) VALUES (1)")
    });
    within(d[0], 100, 0, "inserts on the primary");
    for begin in ["BEGIN", "START TRANSACTION", "SET autocommit = 0"] {
        let d = k.delta("Com_select", || {
            c.query_drop(begin).unwrap();
            reads(&mut c, 50, "SELECT COUNT(*) FROM r_t");
            c.query_drop("COMMIT").unwrap();
            c.query_drop("SET autocommit = 1").unwrap();
        });
        within(d[0], 50, 3, begin);
        within(d[1] + d[2], 0, 10, begin); // the monitor reads replicas too
    }
    // (FOR SHARE is MySQL 8 syntax; its classification is unit-tested.)
    for lock in ["FOR UPDATE", "LOCK IN SHARE MODE"] {
        let d = k.delta("Com_select", || {
            reads(
                &mut c,
                50,
                &format!("SELECT v FROM r_t WHERE id = 1 {lock}"),
            )
        });
        within(d[0], 50, 3, lock);
    }
}

#[test]
fn read_only_transactions_run_on_a_replica() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    let mut k = Counters::new();
    let d = k.delta("Com_select", || {
        c.query_drop("START TRANSACTION READ ONLY").unwrap();
        reads(&mut c, 50, "SELECT 1");
        c.query_drop("COMMIT").unwrap();
    });
    within(d[0], 0, 3, "primary");
    assert!(
        d[1] == 0 || d[2] == 0,
        "one transaction, one replica: {d:?}"
    );
    within(d[1] + d[2], 50, 3, "replicas");
    // Turned off: the primary.
    let p = Setup {
        group: "[routing]\nhold_ms = 0\nread_only_transactions_on_replicas = false\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || {
        c.query_drop("START TRANSACTION READ ONLY").unwrap();
        reads(&mut c, 50, "SELECT 1");
        c.query_drop("COMMIT").unwrap();
    });
    within(d[0], 50, 3, "primary");
}

#[test]
fn primary_preferred_and_read_primary_percent() {
    let _g = serial();
    let mut k = Counters::new();
    // Cetus's own key names work too.
    let p = Setup {
        group: "[routing]\nhold_ms = 0\nmaster-preferred = true\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || reads(&mut c, 1000, "SELECT 1"));
    within(d[0], 1000, 10, "primary_preferred");
    // hint > primary_preferred
    let d = k.delta("Com_select", || {
        reads(&mut c, 200, "/*#mode=READONLY*/ SELECT 1")
    });
    // The monitor's first reads of each replica (their variables, the
    // catalogue) may fall in this window: up to 3 SELECTs a replica.
    within(
        d[1] + d[2],
        200,
        10,
        "READONLY hint under primary_preferred",
    );
    within(
        d[0],
        0,
        5,
        "READONLY hint under primary_preferred, on the primary",
    );

    let p = Setup {
        group: "[routing]\nhold_ms = 0\nread-master-percentage = 30\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || reads(&mut c, 10_000, "SELECT 1"));
    eprintln!("read_primary_percent = 30: {d:?}");
    within(d[0], 3000, 300, "30% to the primary");
    within(d[1], 3500, 350, "replica 1");
    within(d[2], 3500, 350, "replica 2");
    // primary_preferred > read_primary_percent
    let p = Setup {
        group: "[routing]\nhold_ms = 0\nread_primary_percent = 30\nprimary_preferred = true\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || reads(&mut c, 500, "SELECT 1"));
    within(d[0], 500, 5, "primary_preferred over read_primary_percent");
}

#[test]
fn hints() {
    let _g = serial();
    let mut k = Counters::new();
    let p = no_hold_proxy();
    let mut c = p.conn();
    let d = k.delta("Com_select", || {
        reads(&mut c, 200, "/*#mode=READWRITE*/ SELECT 1")
    });
    within(d[0], 200, 3, "READWRITE");
    let d = k.delta("Com_select", || {
        reads(&mut c, 200, "SELECT /*# mode = \"READONLY\" */ 1")
    });
    within(d[1] + d[2], 200, 3, "READONLY");
    // READONLY with no replica: the primary.
    let p = Setup {
        group: NO_HOLD,
        no_replicas: true,
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || {
        reads(&mut c, 100, "/*#mode=READONLY*/ SELECT 1")
    });
    within(d[0], 100, 3, "READONLY without replicas");
}

/// A READONLY hint outranks the hold window: right after a transaction
/// (even one that wrote nothing), a hinted read goes to a replica, not to
/// the held primary connection.
#[test]
fn readonly_hint_outranks_the_hold_window() {
    let _g = serial();
    let p = Setup {
        group: "[routing]\nhold_ms = 5000\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    for _ in 0..5 {
        c.query_drop("BEGIN").unwrap();
        c.query_drop("DO 0").unwrap();
        c.query_drop("COMMIT").unwrap();
        let port: Option<u16> = c.query_first("/*#mode=READONLY*/ SELECT @@port").unwrap();
        assert!(
            lab().replicas.contains(&port.unwrap_or(0)),
            "a hinted read after a transaction ran on {port:?}"
        );
        // Without the hint, the hold window keeps reads on the primary.
        c.query_drop("BEGIN").unwrap();
        c.query_drop("DO 0").unwrap();
        c.query_drop("COMMIT").unwrap();
        let port: Option<u16> = c.query_first("SELECT @@port").unwrap();
        assert_eq!(
            port,
            Some(lab().primary),
            "an unhinted read in the hold window"
        );
    }
}

#[test]
fn no_replica_available_reads_from_the_primary() {
    let _g = serial();
    let mut k = Counters::new();
    let (d1, d2) = (free_port(), free_port());
    let p = Setup {
        group: "connect_timeout_ms = 300\n[routing]\nhold_ms = 0\n",
        replicas_override: Some(vec![d1, d2]),
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || reads(&mut c, 200, "SELECT 1"));
    within(d[0], 200, 5, "primary serves the reads");
}

#[test]
fn replicas_in_maintenance_leave_rotation() {
    let _g = serial();
    let mut k = Counters::new();
    let lab = lab();
    let p = no_hold_proxy();
    let mut c = p.conn();
    let mut a = p.admin();
    a.query_drop(format!("SET MAINTENANCE ON 127.0.0.1:{}", lab.replicas[0]))
        .unwrap();
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(
        d[1],
        0,
        10,
        "replica in maintenance (the monitor reads it too)",
    );
    within(d[2], 300, 5, "the other replica");
    // EXPLAIN ROUTE names the servers a read would go to now.
    let explain = |a: &mut mysql::Conn| -> String {
        let rows: Vec<mysql::Row> = a.query("EXPLAIN ROUTE SELECT 1").unwrap();
        rows[0].get("servers").unwrap()
    };
    let servers = explain(&mut a);
    assert!(
        servers.starts_with(&format!("127.0.0.1:{}, else", lab.replicas[1]))
            && servers.contains(&format!(
                "out of rotation: 127.0.0.1:{} maintenance",
                lab.replicas[0]
            )),
        "{servers}"
    );
    a.query_drop(format!("SET MAINTENANCE ON 127.0.0.1:{}", lab.replicas[1]))
        .unwrap();
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(d[0], 300, 5, "all replicas in maintenance: the primary");
    let servers = explain(&mut a);
    assert!(
        servers.starts_with(&format!(
            "127.0.0.1:{} (no replica in rotation)",
            lab.primary
        )),
        "{servers}"
    );
    let rows: Vec<mysql::Row> = a.query("SHOW BACKENDS").unwrap();
    assert_eq!(
        rows.iter()
            .filter(|r| r.get::<String, _>("state").unwrap() == "maintenance")
            .count(),
        2
    );
    for r in &lab.replicas {
        a.query_drop(format!("SET MAINTENANCE OFF 127.0.0.1:{r}"))
            .unwrap();
    }
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(d[1], 150, 15, "back in rotation");
    assert!(format!("{:?}", a.query_drop("SET MAINTENANCE ON 10.0.0.1:1")).contains("no server"));
}

#[test]
fn weights_primary_weight_and_balance_modes() {
    let _g = serial();
    let mut k = Counters::new();
    for balance in ["round_robin", "weighted"] {
        let p = Setup {
            group: &format!("[routing]\nhold_ms = 0\nbalance = \"{balance}\"\n"),
            replica_weights: Some(vec![1, 3]),
            ..Default::default()
        }
        .start();
        let mut c = p.conn();
        let d = k.delta("Com_select", || reads(&mut c, 10_000, "SELECT 1"));
        eprintln!("weights 1:3, {balance}: {d:?}");
        within(d[1], 2500, 300, &format!("{balance}: weight 1"));
        within(d[2], 7500, 300, &format!("{balance}: weight 3"));
    }
    // The primary takes part in reads with its own weight.
    let p = Setup {
        group: "primary_weight = 1\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let d = k.delta("Com_select", || reads(&mut c, 9000, "SELECT 1"));
    eprintln!("primary_weight 1: {d:?}");
    for (i, n) in d.iter().enumerate() {
        within(*n, 3000, 300, &format!("server {i}"));
    }
    // Load-aware modes: concurrent clients, every read answered, both
    // replicas used.
    for balance in ["least_outstanding", "least_latency"] {
        let p = Setup {
            group: &format!("[routing]\nhold_ms = 0\nbalance = \"{balance}\"\n"),
            ..Default::default()
        }
        .start();
        let d = k.delta("Com_select", || {
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| reads(&mut p.conn(), 500, "SELECT 1"));
                }
            });
        });
        eprintln!("{balance}: {d:?}");
        within(d[1] + d[2], 2000, 40, balance);
        assert!(
            d[1] > 100 && d[2] > 100,
            "{balance} used one replica only: {d:?}"
        );
    }
    let _ = lab;
}

#[test]
fn per_user_routing_and_explain_route() {
    let _g = serial();
    let mut k = Counters::new();
    let p = Setup {
        group: NO_HOLD,
        users: "[[users]]\nname = \"reporting\"\npassword = \"rp\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\nrouting = { primary_preferred = true }\n",
        ..Default::default()
    }.start();
    let mut rep =
        mysql::Conn::new(mysql::Opts::from_url(&p.url("reporting", "rp", "sextant_test")).unwrap())
            .unwrap();
    let d = k.delta("Com_select", || reads(&mut rep, 300, "SELECT 1"));
    within(d[0], 300, 5, "reporting user");
    let mut app = p.conn();
    let d = k.delta("Com_select", || reads(&mut app, 300, "SELECT 1"));
    within(d[1] + d[2], 300, 5, "app user");

    let mut a = p.admin();
    let row: mysql::Row = a
        .query_first("EXPLAIN ROUTE SELECT * FROM t WHERE id = 1")
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<String, _>("target").unwrap(), "replica");
    assert_eq!(row.get::<String, _>("rule").unwrap(), "read");
    let row: mysql::Row = a
        .query_first("EXPLAIN ROUTE FOR USER reporting SELECT 1")
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<String, _>("rule").unwrap(), "primary-preferred");
    for (sql, rule) in [
        ("SELECT * FROM t FOR UPDATE", "locking-read"),
        ("/*#mode=READWRITE*/ SELECT 1", "hint"),
        ("INSERT INTO t VALUES (1)", "write"),
        ("SELECT LAST_INSERT_ID()", "previous-statement"),
        ("SELECT my_function()", "stored-function"),
        ("START TRANSACTION READ ONLY", "read-only-transaction"),
    ] {
        let row: mysql::Row = a
            .query_first(format!("EXPLAIN ROUTE {sql}"))
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<String, _>("rule").unwrap(), rule, "{sql}");
    }
}

#[test]
fn session_bound_statements_give_correct_results() {
    let _g = serial();
    let p = Setup {
        group: "[routing]\nhold_ms = 50\n",
        ..Default::default()
    }
    .start();
    let mut c = p.conn();
    let mut churn = p.conn();
    let pause = |churn: &mut mysql::Conn| {
        // Longer than the hold window, with other traffic meanwhile.
        std::thread::sleep(std::time::Duration::from_millis(120));
        reads(churn, 5, "/*#mode=READWRITE*/ SELECT 1");
    };
    c.query_drop("CREATE TABLE IF NOT EXISTS sb_t (id int primary key auto_increment, v int)")
        .unwrap();
    // LAST_INSERT_ID() and @@identity after the window has passed.
    c.query_drop("INSERT INTO sb_t (v) VALUES (1)").unwrap();
    let want = c.last_insert_id();
    pause(&mut churn);
    churn.query_drop("INSERT INTO sb_t (v) VALUES (2)").unwrap();
    let got: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").unwrap();
    assert_eq!(got, Some(want), "LAST_INSERT_ID()");
    pause(&mut churn);
    let got: Option<u64> = c.query_first("SELECT @@identity").unwrap();
    assert_eq!(got, Some(want), "@@identity");
    // FOUND_ROWS() after SQL_CALC_FOUND_ROWS, however late.
    let _: Vec<i64> = c
        .query("SELECT SQL_CALC_FOUND_ROWS id FROM sb_t LIMIT 1")
        .unwrap();
    pause(&mut churn);
    let total: Option<i64> = c.query_first("SELECT FOUND_ROWS()").unwrap();
    let real: Option<i64> = c
        .query_first("/*#mode=READWRITE*/ SELECT COUNT(*) FROM sb_t")
        .unwrap();
    assert_eq!(total, real, "FOUND_ROWS()");
    // SELECT ... INTO a user variable, read later.
    c.query_drop("SELECT MAX(id) INTO @m FROM sb_t").unwrap();
    pause(&mut churn);
    let m: Option<i64> = c.query_first("SELECT @m").unwrap();
    assert_eq!(
        m,
        real.map(|r| r.max(0)).and_then(|_| c
            .query_first("/*#mode=READWRITE*/ SELECT MAX(id) FROM sb_t")
            .unwrap())
    );
    // A stored function that writes runs on the primary (a replica would
    // diverge, since the lab user may write there).
    let mut k = Counters::new();
    c.query_drop("DROP FUNCTION IF EXISTS sb_bump").unwrap();
    c.query_drop(
        "CREATE FUNCTION sb_bump() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO sb_t (v) VALUES (99); RETURN 1; END",
    )
    .unwrap();
    let d = k.delta("Com_select", || {
        let one: Option<i64> = c.query_first("SELECT sb_bump()").unwrap();
        assert_eq!(one, Some(1));
    });
    within(d[0], 1, 0, "stored function on the primary");
    // Sequences.
    c.query_drop("CREATE SEQUENCE IF NOT EXISTS sb_seq")
        .unwrap();
    let a: Option<i64> = c.query_first("SELECT NEXTVAL(sb_seq)").unwrap();
    pause(&mut churn);
    let b: Option<i64> = c.query_first("SELECT NEXT VALUE FOR sb_seq").unwrap();
    assert_eq!(b.unwrap(), a.unwrap() + 1);
    // ROW_COUNT() right after a write.
    c.query_drop("UPDATE sb_t SET v = v + 1 WHERE v = 99")
        .unwrap();
    let rc: Option<i64> = c.query_first("SELECT ROW_COUNT()").unwrap();
    assert_eq!(rc, Some(1));
    // Temporary tables and named locks: tested in sessions.rs.
}

#[test]
fn lagging_replicas_leave_rotation_and_come_back() {
    let _g = serial();
    let _restore = RestoreReplication;
    let lab = lab();
    let (r1, r2) = (lab.replicas[0], lab.replicas[1]);
    let p = Setup {
        group: "max_replica_lag_ms = 800\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let secs = std::time::Duration::from_secs;
    p.wait_state(r1, "up", secs(5));
    p.wait_state(r2, "up", secs(5));
    let mut c = p.conn();
    let mut k = Counters::new();

    // Replication stopped on replica 1: out of rotation within a second.
    direct(r1).query_drop("STOP SLAVE SQL_THREAD").unwrap();
    let took = p.wait_state(r1, "lagging", secs(5));
    eprintln!("stopped replica out of rotation after {took:?}");
    assert!(took < secs(2), "took {took:?}");
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(d[1], 0, 10, "stopped replica (the monitor reads it too)");
    within(d[2], 300, 5, "healthy replica");

    // Replica 2 two seconds behind (MASTER_DELAY): every replica lagging,
    // so reads go to the primary, without errors.
    let mut d2 = direct(r2);
    d2.query_drop("STOP SLAVE").unwrap();
    d2.query_drop("CHANGE MASTER TO MASTER_DELAY = 2").unwrap();
    d2.query_drop("START SLAVE").unwrap();
    p.wait_state(r2, "lagging", secs(6));
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(d[0], 300, 5, "all replicas lagging: the primary");

    // Caught up: back in rotation.
    direct(r1).query_drop("START SLAVE SQL_THREAD").unwrap();
    d2.query_drop("STOP SLAVE").unwrap();
    d2.query_drop("CHANGE MASTER TO MASTER_DELAY = 0").unwrap();
    d2.query_drop("START SLAVE").unwrap();
    p.wait_state(r1, "up", secs(6));
    p.wait_state(r2, "up", secs(8));
    let d = k.delta("Com_select", || reads(&mut c, 300, "SELECT 1"));
    within(d[1] + d[2], 300, 5, "replicas back");
    assert!(d[1] > 50 && d[2] > 50, "{d:?}");
}

/// Servers named by their Unix sockets (sextant on the database host):
/// every connection, the monitor's included, goes over the socket, and
/// routing, lag checks and failure handling work as over TCP.
#[test]
fn servers_on_unix_sockets() {
    let _g = serial();
    let _restore = RestoreReplication;
    let lab = lab();
    let p = Setup {
        group: "max_replica_lag_ms = 800\n[routing]\nhold_ms = 0\n",
        unix_sockets: true,
        ..Default::default()
    }
    .start();
    let secs = std::time::Duration::from_secs;
    let (s1, s2) = (&lab.sockets[1], &lab.sockets[2]);
    p.wait_state_at(s1, "up", secs(5));
    p.wait_state_at(s2, "up", secs(5));
    let mut c = p.conn();
    // The server sees a socket client as "localhost", a TCP one as
    // "127.0.0.1:port".
    let host = "SELECT host FROM information_schema.processlist WHERE id = @@pseudo_thread_id";
    for _ in 0..4 {
        let h: String = c.query_first(host).unwrap().unwrap();
        assert_eq!(h, "localhost", "a read did not come over a socket");
    }
    c.query_drop("BEGIN").unwrap();
    let h: String = c.query_first(host).unwrap().unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(h, "localhost", "the primary's connection");

    let mut k = Counters::new();
    let d = k.delta("Com_select", || reads(&mut c, 1000, "SELECT 1"));
    within(d[0], 0, 10, "primary");
    within(d[1], 500, 100, "replica 1");
    within(d[2], 500, 100, "replica 2");
    // The admin commands name a socket server by its path.
    p.admin()
        .query_drop(format!("SET MAINTENANCE ON '{s1}'"))
        .unwrap();
    let d = k.delta("Com_select", || reads(&mut c, 200, "SELECT 1"));
    within(d[1], 0, 10, "replica in maintenance");
    within(d[2], 200, 5, "the other replica");
    p.admin()
        .query_drop(format!("SET MAINTENANCE OFF '{s1}'"))
        .unwrap();

    // (After a write, read_your_writes keeps reads on the primary until
    // the monitor sees the replicas apply it: writes come last.)
    c.query_drop("CREATE TABLE IF NOT EXISTS r_sock (id int primary key auto_increment, v int)")
        .unwrap();
    let d = k.delta("Com_insert", || {
        reads(&mut c, 50, "INSERT INTO r_sock (v) VALUES (1)")
    });
    within(d[0], 50, 0, "inserts on the primary");

    // The monitor reads lag over the socket too.
    direct(lab.replicas[0])
        .query_drop("STOP SLAVE SQL_THREAD")
        .unwrap();
    p.wait_state_at(s1, "lagging", secs(5));
    let d = k.delta("Com_select", || reads(&mut c, 200, "SELECT 1"));
    within(d[1], 0, 10, "lagging replica");
    within(d[2], 200, 5, "healthy replica");
    direct(lab.replicas[0])
        .query_drop("START SLAVE SQL_THREAD")
        .unwrap();
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    assert!(
        rows.iter()
            .all(|r| r.get::<String, _>("address").unwrap().ends_with(".sock")),
        "SHOW BACKENDS lists the socket paths"
    );
}

/// The golden routing cases (crates/routing/testdata) that a fresh session
/// can run on the lab: EXPLAIN ROUTE must give the golden plan's target
/// and rule, and the statement, run through sextant, must execute on the
/// server EXPLAIN ROUTE named (counted by each server's Questions).
#[test]
fn explain_route_agrees_with_the_servers_for_golden_cases() {
    let _g = serial();
    let dir = repo_root().join("crates/routing/testdata");
    let mut cases = Vec::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for c in v.as_array().unwrap() {
            let sql = c["sql"].as_str().unwrap();
            // What a fresh session runs as a text statement, with a
            // policy a user can have, and that returns at once (cases of a
            // catalogue of their own have their lab test).
            if c["session"] != "free"
                || c["command"] != "query"
                || c.get("group").is_some()
                || c.get("tables").is_some()
                || sql.contains("SLEEP")
            {
                continue;
            }
            cases.push(c.clone());
        }
    }
    // One user per routing policy that the cases use.
    let mut policies: Vec<String> = Vec::new();
    let mut users = String::new();
    for c in &cases {
        let p = c.get("policy").map(|p| p.to_string()).unwrap_or_default();
        if !p.is_empty() && !policies.contains(&p) {
            let inline: Vec<String> = c["policy"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("\"{k}\" = {v}"))
                .collect();
            users.push_str(&format!(
                "[[users]]\nname = \"u{n}\"\npassword = \"p\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\nrouting = {{ {} }}\n",
                inline.join(", "),
                n = policies.len()
            ));
            policies.push(p);
        }
    }
    let p = Setup {
        group: NO_HOLD,
        users: &users,
        ..Default::default()
    }
    .start();
    // An empty database: statements naming tables fail on whichever server
    // runs them, and change nothing.
    let lab = lab();
    direct(lab.primary)
        .query_drop("DROP DATABASE IF EXISTS explain_route; CREATE DATABASE explain_route")
        .unwrap();
    sync_replicas();
    // Replica targets first: a write's GTID (read_your_writes) would send
    // the reads right after it to the primary until the replicas apply it.
    cases.sort_by_key(|c| c["expect"]["target"] != "replica");
    assert!(
        cases.len() >= 50,
        "only {} runnable golden cases",
        cases.len()
    );
    let mut admin = p.admin();
    let mut k = Counters::new();
    const N: i64 = 30;
    for c in &cases {
        let sql = c["sql"].as_str().unwrap();
        let policy = c.get("policy").map(|p| p.to_string()).unwrap_or_default();
        let (user, pass) = match policies.iter().position(|x| *x == policy) {
            Some(i) => (format!("u{i}"), "p"),
            None => ("app".to_string(), "apppass"),
        };
        let row: mysql::Row = admin
            .query_first(format!("EXPLAIN ROUTE FOR USER {user} {sql}"))
            .unwrap()
            .unwrap();
        let target: String = row.get("target").unwrap();
        let rule: String = row.get("rule").unwrap();
        assert_eq!(
            (target.as_str(), rule.as_str()),
            (
                c["expect"]["target"].as_str().unwrap(),
                c["expect"]["rule"].as_str().unwrap()
            ),
            "EXPLAIN ROUTE {sql} for {user} differs from the golden plan"
        );
        let mut conn =
            mysql::Conn::new(mysql::Opts::from_url(&p.url(&user, pass, "explain_route")).unwrap())
                .unwrap();
        // A plain BEGIN is answered by sextant and sent with the
        // transaction's next statement: a DO and a ROLLBACK follow it, so
        // that it reaches its server.
        let held_back = [
            "BEGIN",
            "BEGIN WORK",
            "START TRANSACTION",
            "START TRANSACTION READ WRITE",
        ]
        .contains(&sql.trim().to_uppercase().as_str());
        let d = k.delta("Questions", || {
            for _ in 0..N {
                let _ = conn.query_drop(sql);
                if held_back {
                    let _ = conn.query_drop("DO 0");
                    let _ = conn.query_drop("ROLLBACK");
                }
            }
        });
        drop(conn);
        eprintln!("{user:>4} {target:7} {rule:20} {d:?} {sql}");
        // The monitor's own queries are the noise (a few per interval).
        let (primary, replicas) = (d[0], d[1] + d[2]);
        let ran_on = if primary >= N && replicas < N / 2 {
            "primary"
        } else if replicas >= N && primary < N / 2 {
            "replica"
        } else {
            "unclear"
        };
        assert_eq!(
            ran_on, target,
            "{sql} (user {user}): EXPLAIN ROUTE says {target}, the servers counted {d:?}"
        );
    }
    eprintln!(
        "{} golden cases: EXPLAIN ROUTE agrees with the servers",
        cases.len()
    );
}

/// Nothing that may write runs on a replica: a READONLY hint on a write,
/// or on a statement that binds the session to its connection, does not
/// move it (nor the session) to a replica, and a write inside a read-only
/// transaction (which runs on a replica) is refused, DDL included.
#[test]
fn writes_never_reach_a_replica_whatever_the_hints() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS ro_t (id int primary key auto_increment, v int)")
        .unwrap();
    c.query_drop("DROP TABLE IF EXISTS ro_ddl").unwrap();
    sync_replicas();
    // (The replicas count the statements they replicate too: where a write
    // ran shows on the primary's counter. consistency=eventual: without it,
    // this user's own writes would keep a replica-bound statement on the
    // primary anyway, until the monitor sees a replica apply them.)
    let mut k = Counters::new();
    for (sql, counter) in [
        (
            "/*#mode=READONLY consistency=eventual*/ INSERT INTO ro_t (v) VALUES (1)",
            "Com_insert",
        ),
        (
            "/*#mode=READONLY consistency=eventual*/ UPDATE ro_t SET v = 2 WHERE id = 1",
            "Com_update",
        ),
        (
            "/*#mode=READONLY consistency=eventual*/ DELETE FROM ro_t WHERE id = 0",
            "Com_delete",
        ),
    ] {
        let d = k.delta(counter, || reads(&mut c, 20, sql));
        assert_eq!(d[0], 20, "{sql}: {d:?}");
    }
    // A hinted statement that binds the session leaves it on the primary,
    // and the writes after it stay there.
    for bind in [
        "/*#mode=READONLY consistency=eventual*/ SET @v = 1",
        "/*#mode=READONLY consistency=eventual*/ CREATE TEMPORARY TABLE ro_tmp (id int)",
        "/*#mode=READONLY consistency=eventual*/ BEGIN",
    ] {
        let mut s = p.conn();
        let d = k.delta("Com_insert", || {
            s.query_drop(bind).unwrap();
            reads(&mut s, 10, "INSERT INTO ro_t (v) VALUES (3)");
            let _ = s.query_drop("COMMIT");
        });
        assert_eq!(d[0], 10, "{bind}: inserts went {d:?}");
    }
    // A read-only transaction runs on a replica: a write in it is refused
    // with the server's own code for it, and DDL (which would commit the
    // transaction and run) too.
    // (eventual: this user's writes above would keep its reads on the
    // primary until the monitor sees a replica apply them)
    let mut s = p.conn();
    s.query_drop("/*# consistency=eventual */ START TRANSACTION READ ONLY")
        .unwrap();
    let port: Option<u16> = s.query_first("SELECT @@port").unwrap();
    assert!(
        lab().replicas.contains(&port.unwrap_or(0)),
        "the read-only transaction runs on {port:?}, not a replica"
    );
    let d = k.delta("Com_insert", || {
        let e = s
            .query_drop("INSERT INTO ro_t (v) VALUES (4)")
            .expect_err("a write in a read-only transaction");
        assert!(e.to_string().contains("1792"), "{e}");
    });
    assert_eq!(d, vec![0, 0, 0], "the refused insert ran somewhere");
    let e = s
        .query_drop("CREATE TABLE ro_ddl (id int)")
        .expect_err("DDL in a read-only transaction");
    assert!(e.to_string().contains("1792"), "{e}");
    s.query_drop("COMMIT").unwrap();
    for port in std::iter::once(lab().primary).chain(lab().replicas.iter().copied()) {
        let n: Option<i64> = direct(port)
            .query_first(
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = 'sextant_test' AND table_name = 'ro_ddl'",
            )
            .unwrap();
        assert_eq!(n, Some(0), "ro_ddl created on {port}");
    }
    // The replicas have exactly the primary's rows: none diverged.
    sync_replicas();
    let q = "SELECT COUNT(*), COALESCE(SUM(v), 0) FROM ro_t";
    let want: Option<(i64, i64)> = direct(lab().primary).query_first(q).unwrap();
    for &r in &lab().replicas {
        let got: Option<(i64, i64)> = direct(r).query_first(q).unwrap();
        assert_eq!(got, want, "replica {r} diverged");
    }
}

/// A session in NO_BACKSLASH_ESCAPES (or ANSI_QUOTES) mode reads a string
/// differently from the default: a call the default reading would take for
/// part of a string is a call. Such a statement is read both ways, and the
/// function, which writes, runs on the primary: the replicas do not diverge.
#[test]
fn statements_whose_reading_depends_on_sql_mode_are_read_carefully() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    c.query_drop("CREATE TABLE IF NOT EXISTS lex_t (id int primary key auto_increment)")
        .unwrap();
    c.query_drop("DROP FUNCTION IF EXISTS lex_bump").unwrap();
    c.query_drop(
        "CREATE FUNCTION lex_bump() RETURNS INT MODIFIES SQL DATA \
         BEGIN INSERT INTO lex_t VALUES (NULL); RETURN 1; END",
    )
    .unwrap();
    sync_replicas();
    let mut s = p.conn();
    s.query_drop("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
        .unwrap();
    for _ in 0..10 {
        // In this mode: 'a\' is a string, then a call, then 'b'.
        let r: Option<(String, i64, String)> = s
            .query_first("/*# consistency=eventual */ SELECT 'a\\', lex_bump(), 'b'")
            .unwrap();
        assert_eq!(r.map(|r| r.1), Some(1));
    }
    s.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .unwrap();
    for _ in 0..10 {
        // In this mode "lex_bump" is the function's name.
        let r: Option<i64> = s
            .query_first("/*# consistency=eventual */ SELECT \"lex_bump\"()")
            .unwrap();
        assert_eq!(r, Some(1));
    }
    sync_replicas();
    let q = "SELECT COUNT(*) FROM sextant_test.lex_t";
    let want: Option<i64> = direct(lab().primary).query_first(q).unwrap();
    assert_eq!(
        want,
        Some(20),
        "the function ran elsewhere than the primary"
    );
    for &r in &lab().replicas {
        let got: Option<i64> = direct(r).query_first(q).unwrap();
        assert_eq!(got, want, "replica {r} diverged");
    }
}

/// Reads that may write through what only the server's catalogue shows: a
/// view that calls a function with side effects, and a stored function
/// whose name MySQL has as a built-in (MariaDB does not). The monitor reads
/// the primary's catalogue (at once after DDL through sextant), and such
/// reads run on the primary: the replicas do not diverge.
#[test]
fn reads_of_views_and_functions_that_may_write_run_on_the_primary() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut c = p.conn();
    for sql in [
        "DROP VIEW IF EXISTS cat_v_outer",
        "DROP VIEW IF EXISTS cat_v_logs",
        "DROP VIEW IF EXISTS cat_v_plain",
        "DROP TABLE IF EXISTS cat_log",
        "CREATE TABLE cat_log (id int primary key auto_increment)",
        "DROP FUNCTION IF EXISTS cat_log_it",
        "CREATE FUNCTION cat_log_it() RETURNS INT MODIFIES SQL DATA \
         BEGIN INSERT INTO cat_log VALUES (NULL); RETURN 1; END",
        "DROP FUNCTION IF EXISTS uuid_to_bin",
        "CREATE FUNCTION uuid_to_bin(u VARCHAR(36)) RETURNS INT MODIFIES SQL DATA \
         BEGIN INSERT INTO cat_log VALUES (NULL); RETURN 2; END",
        "CREATE VIEW cat_v_logs AS SELECT cat_log_it() AS x",
        "CREATE VIEW cat_v_outer AS SELECT x FROM cat_v_logs",
        "CREATE VIEW cat_v_plain AS SELECT 1 AS x",
        "DROP TABLE IF EXISTS cat_cols",
        "CREATE TABLE cat_cols (cat_v_logs INT)",
    ] {
        c.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    sync_replicas();
    // The DDL marked the catalogue stale; the monitor reads it within an
    // interval. EXPLAIN ROUTE classifies with the same catalogue.
    let mut admin = p.admin();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let rows: Vec<mysql::Row> = admin
            .query("EXPLAIN ROUTE SELECT * FROM cat_v_outer")
            .unwrap();
        let rule: String = rows[0].get("rule").unwrap_or_default();
        if rule == "stored-function" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the catalogue was not read: rule {rule}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut k = Counters::new();
    let d = k.delta("Com_select", || {
        reads(
            &mut c,
            10,
            "/*# consistency=eventual */ SELECT * FROM cat_v_plain",
        )
    });
    // (The monitor's own reads of the catalogue count too.)
    within(d[0], 0, 2, "a plain view's reads on the primary");
    // A column named like a writing view is not the view.
    let d = k.delta("Com_select", || {
        reads(
            &mut c,
            10,
            "/*# consistency=eventual */ SELECT cat_v_logs FROM cat_cols",
        )
    });
    within(
        d[0],
        0,
        2,
        "reads of a column named like a writing view on the primary",
    );
    let mut s = p.conn();
    for sql in [
        "/*# consistency=eventual */ SELECT * FROM cat_v_logs",
        "/*# consistency=eventual */ SELECT x FROM sextant_test.`cat_v_outer`",
        "/*# consistency=eventual */ SELECT uuid_to_bin('x')",
        "/*#mode=READONLY consistency=eventual*/ SELECT uuid_to_bin('x')",
    ] {
        reads(&mut s, 5, sql);
    }
    sync_replicas();
    let q = "SELECT COUNT(*) FROM sextant_test.cat_log";
    let want: Option<i64> = direct(lab().primary).query_first(q).unwrap();
    assert_eq!(want, Some(20), "some calls ran elsewhere than the primary");
    for &r in &lab().replicas {
        let got: Option<i64> = direct(r).query_first(q).unwrap();
        assert_eq!(got, want, "replica {r} diverged");
    }
}

/// A view created directly on the primary, not through sextant, read
/// through sextant at once: the catalogue sextant last read does not list
/// it, so sextant asks the primary what it is before placing the read, and
/// the read runs there (the function the view calls writes on the primary
/// and replicates). A plain table created the same way reads on the
/// replicas from its first read.
#[test]
fn a_view_created_behind_sextants_back_is_not_read_on_a_replica() {
    let _g = serial();
    let p = no_hold_proxy();
    let mut d = direct(lab().primary);
    for sql in [
        "DROP VIEW IF EXISTS sextant_test.nv_logs",
        "DROP TABLE IF EXISTS sextant_test.nv_plain",
        "DROP TABLE IF EXISTS sextant_test.nv_log",
        "CREATE TABLE sextant_test.nv_log (id int primary key auto_increment)",
        "DROP FUNCTION IF EXISTS sextant_test.nv_log_it",
        "CREATE FUNCTION sextant_test.nv_log_it() RETURNS INT MODIFIES SQL DATA \
         BEGIN INSERT INTO sextant_test.nv_log VALUES (NULL); RETURN 1; END",
    ] {
        d.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    sync_replicas();
    // The monitor has read the catalogue, and a read of nv_log taught it
    // that table.
    let mut c = p.conn();
    let mut admin = p.admin();
    let rule = |admin: &mut mysql::Conn, sql: &str| -> String {
        let rows: Vec<mysql::Row> = admin.query(format!("EXPLAIN ROUTE {sql}")).unwrap();
        rows[0].get("rule").unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while {
        c.query_drop("SELECT COUNT(*) FROM nv_log").unwrap();
        rule(&mut admin, "SELECT * FROM nv_log") != "read"
    } {
        assert!(
            std::time::Instant::now() < deadline,
            "the catalogue was not read"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Behind sextant's back.
    d.query_drop("CREATE VIEW sextant_test.nv_logs AS SELECT sextant_test.nv_log_it() AS x")
        .unwrap();
    d.query_drop("CREATE TABLE sextant_test.nv_plain (a INT)")
        .unwrap();
    sync_replicas();
    let rows: Vec<mysql::Row> = admin.query("EXPLAIN ROUTE SELECT * FROM nv_logs").unwrap();
    let note: String = rows[0].get("note").unwrap_or_default();
    assert!(note.contains("did not list"), "{note}");
    let mut k = Counters::new();
    let got = k.delta("Com_select", || {
        reads(
            &mut c,
            5,
            "/*# consistency=eventual */ SELECT * FROM nv_logs",
        )
    });
    // The lookup and the reads on the primary.
    within(
        got[1] + got[2],
        0,
        2,
        "reads of a new writing view on the replicas",
    );
    sync_replicas();
    let q = "SELECT COUNT(*) FROM sextant_test.nv_log";
    let want: Option<i64> = direct(lab().primary).query_first(q).unwrap();
    assert_eq!(want, Some(5), "some calls ran elsewhere than the primary");
    for &r in &lab().replicas {
        let got: Option<i64> = direct(r).query_first(q).unwrap();
        assert_eq!(got, want, "replica {r} diverged");
    }
    assert_eq!(rule(&mut admin, "SELECT * FROM nv_logs"), "stored-function");
    let got = k.delta("Com_select", || {
        reads(
            &mut c,
            10,
            "/*# consistency=eventual */ SELECT * FROM nv_plain",
        )
    });
    within(
        got[1] + got[2],
        10,
        1,
        "reads of a new table on the replicas",
    );
    assert_eq!(rule(&mut admin, "SELECT * FROM nv_plain"), "read");
}

/// The names sextant takes for built-ins are built-ins on the lab's
/// MariaDB, apart from those it knows to be MySQL's alone: any other name
/// MariaDB resolves as a stored function would let a call of one reach a
/// replica. (Some keywords and geometry constructors are built in only
/// with their own argument forms; a stored function of that name is found
/// by the catalogue.)
#[test]
fn mariadb_builtins_agree() {
    const GRAMMAR_ONLY: &[&str] = &[
        "against",
        "array",
        "current",
        "escape",
        "filter",
        "geomcollection",
        "geometrycollection",
        "json_table",
        "lateral",
        "linestring",
        "mode",
        "multilinestring",
        "multipoint",
        "multipolygon",
        "of",
        "point",
        "polygon",
        "share",
    ];
    let mut c = direct(lab().primary);
    let mut stored = Vec::new();
    for name in sextant_sql::builtin::BUILTIN {
        if let Err(e) = c.query_drop(format!("SELECT {name}()")) {
            if e.to_string().contains("1305") {
                stored.push(*name);
            }
        }
    }
    let unknown: Vec<_> = stored
        .iter()
        .filter(|n| !sextant_sql::builtin::MYSQL_ONLY.contains(n) && !GRAMMAR_ONLY.contains(n))
        .collect();
    assert!(
        unknown.is_empty(),
        "MariaDB takes these for stored functions, sextant for built-ins: {unknown:?}"
    );
    assert!(
        stored.contains(&"uuid_to_bin"),
        "the check found no MySQL-only name: {stored:?}"
    );
}
