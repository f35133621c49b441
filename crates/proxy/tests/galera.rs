//! A real three-node MariaDB Galera cluster (Debian's galera-4) on loopback,
//! with `topology = "galera"`: nodes that are not Synced leave rotation, one
//! node takes the writes (or, with galera_multi_writer, one node per
//! schema), and a node killed under a read load causes no client errors.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::time::{Duration, Instant};

/// The tests share one cluster and change its nodes' states: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Write sets that originated on a node (Com_insert also counts the write
/// sets a Galera node applies for the others).
fn local_commits(port: u16) -> u64 {
    status_counter(port, "wsrep_local_commits")
}

fn galera() -> &'static Lab {
    let _ = LAB_ARGS.set(&["--galera"]);
    let lab = lab();
    assert!(
        std::fs::read_to_string(lab.dir.join("lab.env"))
            .unwrap()
            .contains("LAB_GALERA=1"),
        "this test binary needs a Galera lab"
    );
    lab
}

fn nodes(lab: &Lab) -> Vec<u16> {
    let mut v = vec![lab.primary];
    v.extend(&lab.replicas);
    v
}

fn proxy(extra_group: &str, extra_tables: &str) -> Proxy {
    let lab = galera();
    let p = Setup {
        proxy: "",
        group: &format!(
            "topology = \"galera\"\nprimary_wait_ms = 3000\n{extra_group}\n[routing]\nhold_ms = 0\n{extra_tables}\n"
        ),
        ..Default::default()
    }.start();
    for n in nodes(lab) {
        p.wait_state(n, "up", Duration::from_secs(10));
    }
    p
}

fn writer(p: &Proxy) -> u16 {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW BACKENDS").unwrap();
    let writers: Vec<u16> = rows
        .iter()
        .filter(|r| r.get::<String, _>("role").unwrap() == "primary")
        .map(|r| {
            r.get::<String, _>("address").unwrap()[10..]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(writers.len(), 1, "one writer: {writers:?}");
    writers[0]
}

fn setup_table(p: &Proxy) {
    let mut c = p.conn();
    c.query_drop(
        "CREATE TABLE IF NOT EXISTS sextant_test.g (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
    )
    .unwrap();
}

#[test]
fn galera_desynced_node_leaves_rotation_and_writes_move_off_it() {
    let _serial = serial();
    let lab = galera();
    let p = proxy("", "");
    setup_table(&p);
    let w = writer(&p);
    assert_eq!(w, lab.primary, "the configured first node writes");
    let reader = lab.replicas[0];

    // A desynced reader: out within a second, no reads while out.
    direct(reader)
        .query_drop("SET GLOBAL wsrep_desync = ON")
        .unwrap();
    let took = p.wait_state(reader, "excluded", Duration::from_secs(2));
    eprintln!("desynced node out of rotation after {took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let before = status_counter(reader, "Com_select");
    let mut c = p.conn();
    for _ in 0..300 {
        c.query_drop("SELECT v FROM sextant_test.g LIMIT 1")
            .unwrap();
    }
    let got = status_counter(reader, "Com_select") - before;
    // The monitor's own SELECTs (read_only, gtid) count too: ~2 per 500 ms.
    assert!(got <= 12, "{got} selects reached the desynced node");
    direct(reader)
        .query_drop("SET GLOBAL wsrep_desync = OFF")
        .unwrap();
    p.wait_state(reader, "up", Duration::from_secs(5));
    let before = status_counter(reader, "Com_select");
    for _ in 0..300 {
        c.query_drop("SELECT v FROM sextant_test.g LIMIT 1")
            .unwrap();
    }
    assert!(
        status_counter(reader, "Com_select") - before >= 100,
        "the node is back in rotation"
    );

    // Desync the writer: the writes move to a Synced node and stay there
    // when it comes back (a writer that moves back and forth invites
    // certification conflicts).
    direct(w)
        .query_drop("SET GLOBAL wsrep_desync = ON")
        .unwrap();
    p.wait_state(w, "excluded", Duration::from_secs(2));
    let new_writer = writer(&p);
    assert_ne!(new_writer, w);
    let before = local_commits(new_writer);
    let old_before = local_commits(w);
    for i in 0..50 {
        c.exec_drop("INSERT INTO sextant_test.g (v) VALUES (?)", (i,))
            .unwrap();
    }
    // (The writer also commits sextant's heartbeat.)
    assert!(local_commits(new_writer) - before >= 50);
    assert_eq!(local_commits(w) - old_before, 0);
    direct(w)
        .query_drop("SET GLOBAL wsrep_desync = OFF")
        .unwrap();
    p.wait_state(w, "up", Duration::from_secs(5));
    assert_eq!(writer(&p), new_writer, "the writer stays where it moved");

    // Reads after a write: read_your_writes (the default) compares the
    // write's GTID with the nodes' binlog positions; once the monitor has
    // seen the other nodes apply it, reads spread over them again instead
    // of staying on the writer.
    c.exec_drop("INSERT INTO sextant_test.g (v) VALUES (?)", (7,))
        .unwrap();
    let others: Vec<u16> = nodes(lab)
        .into_iter()
        .filter(|&n| n != new_writer)
        .collect();
    let on_others = |c: &mut mysql::Conn| {
        let before: u64 = others
            .iter()
            .map(|&n| status_counter(n, "Com_select"))
            .sum();
        for _ in 0..100 {
            let n: i64 = c
                .query_first("SELECT COUNT(*) FROM sextant_test.g")
                .unwrap()
                .unwrap();
            assert!(n >= 51, "the 51 rows written through sextant: {n}");
        }
        others
            .iter()
            .map(|&n| status_counter(n, "Com_select"))
            .sum::<u64>()
            - before
    };
    std::thread::sleep(Duration::from_millis(1200));
    let spread = on_others(&mut c);
    eprintln!("reads after a write, once applied everywhere, on the other nodes: {spread}");
    assert!(
        spread >= 90,
        "reads after a write never left the writer: {spread}"
    );
}

#[test]
fn galera_multi_writer_keeps_each_schema_on_one_node() {
    let _serial = serial();
    let lab = galera();
    // Without the heartbeat, the only write sets are the test's own.
    let p = proxy("galera_multi_writer = true", "[monitor]\nheartbeat = false");
    let mut admin = direct(lab.primary);
    for i in 0..6 {
        admin
            .query_drop(format!(
                "CREATE DATABASE IF NOT EXISTS mw{i}; CREATE TABLE IF NOT EXISTS mw{i}.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
            ))
            .unwrap();
    }
    let mut used = std::collections::BTreeSet::new();
    for i in 0..6 {
        let before: Vec<u64> = nodes(lab).iter().map(|&n| local_commits(n)).collect();
        let mut c = mysql::Conn::new(
            mysql::Opts::from_url(&p.url("app", "apppass", &format!("mw{i}"))).unwrap(),
        )
        .unwrap();
        for v in 0..20 {
            c.exec_drop("INSERT INTO t (v) VALUES (?)", (v,)).unwrap();
        }
        let delta: Vec<u64> = nodes(lab)
            .iter()
            .zip(&before)
            .map(|(&n, b)| local_commits(n) - b)
            .collect();
        let on: Vec<usize> = (0..delta.len()).filter(|&k| delta[k] > 0).collect();
        assert_eq!(
            on.len(),
            1,
            "schema mw{i}: inserts on one node, got {delta:?}"
        );
        assert_eq!(delta[on[0]], 20);
        used.insert(on[0]);
    }
    assert!(used.len() >= 2, "six schemas all on one node: {used:?}");
}

#[test]
fn galera_killed_node_causes_no_read_errors() {
    let _serial = serial();
    let lab = galera();
    let p = proxy("primary_weight = 1", "");
    sysbench_prepare(lab.primary, 2, 2000);
    let port = p.port;
    let load = std::thread::spawn(move || {
        sysbench_cmd(port, 2, 2000)
            .args(["--threads=8", "--time=6", "--db-ps-mode=auto"])
            .args(["oltp_point_select", "run"])
            .output()
            .expect("sysbench")
    });
    std::thread::sleep(Duration::from_secs(2));
    let victim = lab.replicas[1];
    kill_lab_server(2);
    let out = load.join().unwrap();
    let (text, queries) = sysbench_clean(&out, "a Galera node died", "queries:");
    assert!(queries > 1000, "{text}");
    assert_eq!(p.state_of(victim), "down");

    // It rejoins (a state transfer from a donor) and comes back.
    let t = Instant::now();
    restart_lab_server(2);
    p.wait_state(victim, "up", Duration::from_secs(90));
    eprintln!(
        "killed node back in rotation {:?} after restart",
        t.elapsed()
    );
}

/// Multi-writer Galera: six clients insert numbered rows, each in its own
/// schema (so on its own node), and a node is killed with SIGKILL: writes
/// move to the other nodes, every acknowledged row is in the cluster
/// exactly once, and the node rejoins when restarted.
#[test]
fn galera_killed_node_under_numbered_writes_loses_and_repeats_nothing() {
    let _serial = serial();
    let lab = galera();
    let p = proxy("galera_multi_writer = true", "");
    let mut admin = direct(lab.primary);
    let mut urls = Vec::new();
    for i in 0..6 {
        admin
            .query_drop(format!(
                "CREATE DATABASE IF NOT EXISTS gn{i}; DROP TABLE IF EXISTS gn{i}.kn; \
                 CREATE TABLE gn{i}.kn (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, seq INT NOT NULL)"
            ))
            .unwrap();
        urls.push(p.url("app", "apppass", &format!("gn{i}")));
    }
    let writers = NumberedWriters::start(urls, "kn");
    std::thread::sleep(Duration::from_secs(1));
    let victim = lab.replicas[1];
    kill_lab_server(2);
    p.wait_state(victim, "down", Duration::from_secs(10));
    writers.mark();
    // The cluster holds writes until it evicts the dead node (about 5 s).
    std::thread::sleep(Duration::from_secs(8));
    let reports = writers.stop();
    let total = check_numbered_rows(&mut admin, |w| format!("gn{w}.kn"), &reports);
    for (i, r) in reports.iter().enumerate() {
        assert!(
            r.acked_after_mark > 0,
            "writer {i} wrote nothing after the node died; errors {:?}",
            r.errors
        );
    }
    eprintln!("{total} acknowledged rows on the cluster, all present once");
    restart_lab_server(2);
    p.wait_state(victim, "up", Duration::from_secs(90));
}
