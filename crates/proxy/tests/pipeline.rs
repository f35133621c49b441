//! Pipelined reads (pipeline_depth): plain reads of many sessions share a
//! few server connections, written together and answered in order. Each
//! session must get its own answer, whatever the size of the answers
//! around it, whatever state other sessions have, and a client that goes
//! away mid-answer must not disturb the others.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::io::Write;
use std::time::Duration;

/// One pipelined connection per server and thread, deep enough that all
/// the test's sessions share it.
fn proxy(extra_proxy: &str) -> Proxy {
    Setup {
        proxy: extra_proxy,
        group: "pipeline_depth = 16\npipeline_connections = 1\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start()
}

/// `threads` sessions each read `rounds` values only they asked for, with
/// answers of different sizes (a few bytes to 64 KiB, so several answers
/// share one read from the server, and one answer spans several). Panics
/// on any answer that is not the session's own.
fn own_answers(p: &Proxy, threads: u64, rounds: u64) {
    own_answers_by(p, threads, rounds, false)
}

/// `own_answers`, as text statements or as executions of prepared
/// statements (COM_STMT_EXECUTE). Prepared, each session alternates two
/// statements, so a pipe's connection holds several and each execution
/// must name the right one there.
fn own_answers_by(p: &Proxy, threads: u64, rounds: u64, prepared: bool) {
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let url = p.url("app", "apppass", "sextant_test");
            std::thread::spawn(move || {
                let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
                let stmts = prepared.then(|| {
                    let a = c.prep("SELECT ?, REPEAT(CHAR(65 + ? % 26), ?)");
                    let b = c.prep("SELECT ? + 0, REPEAT(CHAR(97 + ? % 26), ?)");
                    (a.expect("prepare a"), b.expect("prepare b"))
                });
                for i in 0..rounds {
                    let id = t * 1_000_000 + i;
                    let len = if i % 50 == 7 { 65_536 } else { (i * 37) % 300 };
                    let (row, base): (Option<(u64, String)>, u64) = match &stmts {
                        Some((a, b)) => {
                            let (stmt, base) = if i % 2 == 0 { (a, 65) } else { (b, 97) };
                            (
                                c.exec_first(stmt, (id, t, len))
                                    .unwrap_or_else(|e| panic!("session {t}, execution {i}: {e}")),
                                base,
                            )
                        }
                        None => (
                            c.query_first(format!(
                                "SELECT {id}, REPEAT(CHAR(65 + {t} % 26), {len})"
                            ))
                            .unwrap_or_else(|e| panic!("session {t}, read {i}: {e}")),
                            65,
                        ),
                    };
                    let (got, text) = row.expect("a row");
                    assert_eq!(got, id, "session {t} got another session's answer");
                    assert_eq!(
                        text.len() as u64,
                        len,
                        "session {t}: answer {i} cut or mixed"
                    );
                    assert!(
                        text.bytes().all(|x| u64::from(x) == base + t % 26),
                        "session {t}: answer {i} holds another statement's or session's bytes"
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a session failed");
    }
}

/// 16 sessions x 400 reads, on one worker thread and on two (each with
/// pipes of its own): each answer the session's own, most reads through
/// pipes, and several sent together.
fn pipes_carry(prepared: bool) {
    for threads in ["threads = 1", "threads = 2"] {
        let p = proxy(threads);
        own_answers_by(&p, 16, 400, prepared);
        let reads = p.backends_sum("pipelined");
        let sends = p.backends_sum("pipe_sends");
        eprintln!("{threads}, prepared {prepared}: {reads} pipelined in {sends} sends");
        assert!(
            reads >= 16 * 400 / 2,
            "{threads}: most reads should have gone through pipes, {reads} did"
        );
        assert!(
            sends < reads,
            "{threads}: no two reads ever went out together ({reads} reads, {sends} sends)"
        );
    }
}

#[test]
fn every_session_gets_its_own_answers() {
    pipes_carry(false);
}

#[test]
fn prepared_executions_share_pipes_and_get_their_own_answers() {
    pipes_carry(true);
}

#[test]
fn sessions_with_other_state_keep_it() {
    // Sessions that changed their state (sql_mode, database) must not read
    // through a pipe carrying another state, and the pipes must not take
    // theirs.
    let p = proxy("");
    let default_mode: String = p.conn().query_first("SELECT @@sql_mode").unwrap().unwrap();
    let workers: Vec<_> = (0..12)
        .map(|t| {
            let url = p.url("app", "apppass", "sextant_test");
            let default_mode = default_mode.clone();
            std::thread::spawn(move || {
                let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
                let (mode, db) = match t % 3 {
                    0 => (default_mode, "sextant_test".to_string()),
                    1 => {
                        c.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
                            .unwrap();
                        ("ANSI_QUOTES".to_string(), "sextant_test".to_string())
                    }
                    _ => {
                        c.query_drop("USE sbtest").unwrap();
                        (default_mode, "sbtest".to_string())
                    }
                };
                for i in 0..300 {
                    let row: Option<(String, String)> = c
                        .query_first("SELECT @@sql_mode, DATABASE()")
                        .unwrap_or_else(|e| panic!("session {t}, read {i}: {e}"));
                    assert_eq!(
                        row,
                        Some((mode.clone(), db.clone())),
                        "session {t}, read {i}"
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a session saw another session's state");
    }
    assert!(p.backends_sum("pipelined") > 0, "no read was pipelined");
}

#[test]
fn a_client_gone_mid_answer_does_not_disturb_the_others() {
    let p = proxy("threads = 1");
    let others = {
        let url = p.url("app", "apppass", "sextant_test");
        std::thread::spawn(move || {
            let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
            for i in 0..3000u64 {
                let v: Option<u64> = c
                    .query_first(format!("SELECT {i}"))
                    .unwrap_or_else(|e| panic!("read {i} failed: {e}"));
                assert_eq!(v, Some(i));
            }
        })
    };
    // Clients that ask for an 8 MiB answer and hang up after its first
    // bytes, while the other session reads on the same pipes.
    for _ in 0..20 {
        let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
        let q = b"\x03SELECT REPEAT('x', 8388608)";
        let mut pkt = vec![q.len() as u8, 0, 0, 0];
        pkt.extend_from_slice(q);
        r.s.write_all(&pkt).unwrap();
        let mut first = [0u8; 64];
        std::io::Read::read_exact(&mut r.s, &mut first).unwrap();
        drop(r);
        std::thread::sleep(Duration::from_millis(20));
    }
    others
        .join()
        .expect("a read failed while other clients hung up");
    // And sextant is still whole.
    own_answers(&p, 4, 100);
}

#[test]
fn a_long_read_holds_up_no_new_reads() {
    // One thread, one pipe per server: a 2-second read sits at the head of
    // its pipe, and reads that come after it must not queue behind it.
    let p = Setup {
        proxy: "threads = 1",
        group: "pipeline_depth = 16\npipeline_connections = 1\nprimary_weight = 1\n[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let sleeping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sleeper = {
        let url = p.url("app", "apppass", "sextant_test");
        let sleeping = sleeping.clone();
        std::thread::spawn(move || {
            // Reads go through pipes when at least 4 sessions of the
            // thread are mid-statement: three long reads first, on their
            // own connections, then three more, on the pipes, one on every
            // server of the lab (round robin), so whichever server a read
            // goes to, a pipe there is held up.
            let threads: Vec<_> = (0..6)
                .map(|i| {
                    let url = url.clone();
                    if i == 3 {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    std::thread::spawn(move || {
                        let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
                        let v: Option<i32> = c.query_first("SELECT SLEEP(2)").unwrap();
                        assert_eq!(v, Some(0));
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            sleeping.store(false, std::sync::atomic::Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let before = p.backends_sum("pipelined");
    let mut c = p.conn();
    for i in 0..200 {
        let v: Option<i32> = c.query_first(format!("SELECT {i}")).unwrap();
        assert_eq!(v, Some(i));
    }
    assert!(
        sleeping.load(std::sync::atomic::Ordering::SeqCst),
        "quick reads waited for the long ones to end"
    );
    sleeper.join().unwrap();
    assert!(
        before >= 2,
        "the long reads did not go through pipes ({before})"
    );
}

/// Tests that run sysbench share its tables (a prepare drops them first):
/// one at a time.
static SYSBENCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn sysbench_prepared_reads_through_pipes() {
    let _one = SYSBENCH.lock().unwrap_or_else(|e| e.into_inner());
    // libmariadb sends a statement's parameter types with its first
    // execution only: executions through a pipe whose connection has not
    // seen them must carry them, or the server reads the values wrong
    // (sysbench's checks would then fail its run with an error).
    let lab = lab();
    sysbench_prepare(lab.primary, 2, 2000);
    sync_replicas();
    let p = proxy("threads = 2");
    let before = p.backends_sum("pipelined");
    let out = sysbench_cmd(p.port, 2, 2000)
        .args([
            "--threads=16",
            "--time=4",
            "--db-ps-mode=auto",
            "--skip_trx=on",
            "--mysql-ignore-errors=none",
            "oltp_read_only",
            "run",
        ])
        .output()
        .expect("sysbench");
    let (_, queries) = sysbench_clean(
        &out,
        "reading through pipes with prepared statements",
        "queries:",
    );
    let piped = p.backends_sum("pipelined") - before;
    eprintln!("{queries} queries, {piped} through pipes");
    assert!(
        queries > 1000 && queries != u64::MAX,
        "too few queries: {queries}"
    );
    assert!(
        piped * 2 > queries,
        "most prepared reads should have gone through pipes: {piped} of {queries}"
    );
}

#[test]
fn pipes_hold_at_most_half_of_a_servers_connections() {
    // One worker thread, pipes of depth 1 (each read in flight needs a
    // pipe of its own), up to four of them, four connections to the one
    // replica, and four readers. Were all four connections pipes, the
    // reads that find the pipes full, and the read-your-writes waits
    // (which no pipe carries), would find no connection until the reads
    // stop (measured with three connections per server under writes: a
    // sixth of the reads).
    let _one = SYSBENCH.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab();
    sysbench_prepare(lab.primary, 1, 1000);
    sync_replicas();
    let p = Setup {
        proxy: "threads = 1",
        group:
            "pool_max = 4\npipeline_depth = 1\npipeline_connections = 4\n[routing]\nhold_ms = 0\n",
        replicas_override: Some(vec![lab.replicas[0]]),
        ..Default::default()
    }
    .start();
    let run = sysbench_cmd(p.port, 1, 1000)
        .args([
            "--threads=4",
            "--time=4",
            "--db-ps-mode=disable",
            "--mysql-ignore-errors=none",
            "oltp_point_select",
            "run",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sysbench");
    let mut most = 0;
    let deadline = std::time::Instant::now() + Duration::from_millis(3800);
    while std::time::Instant::now() < deadline {
        // Servers in SHOW BACKENDS order: the primary, then the replica.
        most = most.max(p.backends_column("pipes")[1]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run.wait_with_output().expect("sysbench");
    let (_, queries) = sysbench_clean(&out, "reading with pipes and a small pool", "queries:");
    let piped = p.backends_sum("pipelined");
    eprintln!("{queries} queries, {piped} through pipes, at most {most} pipes at once");
    assert!(
        most <= 2,
        "{most} of the replica's 4 connections were pipes"
    );
    assert!(
        piped * 10 > queries,
        "too few reads went through pipes for the test to show anything: {piped} of {queries}"
    );
}
