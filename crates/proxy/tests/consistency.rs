//! Read-your-writes against real replicas made to lag (MASTER_DELAY), as in
//! seed 003: a row written and read back at once must be there, on the same
//! connection and on another one of the same user. (Its own test binary:
//! it changes the lab's replication.)

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Delays every replica by `secs` until dropped.
struct Delay(#[allow(dead_code)] RestoreReplication);

impl Delay {
    fn set(secs: u32) -> Delay {
        set_replica_delay(secs);
        Delay(RestoreReplication)
    }
}

/// Lag is no reason to leave rotation here (max_replica_lag_ms = 0), so
/// the delayed replicas stay in use and only the consistency rule can keep
/// stale reads away.
fn proxy(routing: &str) -> Proxy {
    proxy_with("", routing)
}

/// [`proxy`] with more of the group's settings.
fn proxy_with(group: &str, routing: &str) -> Proxy {
    Setup {
        group: &format!("max_replica_lag_ms = 0\n{group}\n[routing]\nhold_ms = 0\n{routing}\n"),
        ..Default::default()
    }
    .start()
}

fn table(c: &mut mysql::Conn, name: &str) {
    c.query_drop(format!(
        "CREATE TABLE IF NOT EXISTS {name} (id INT PRIMARY KEY, v INT)"
    ))
    .unwrap();
    c.query_drop(format!("DELETE FROM {name}")).unwrap();
}

/// `rounds` of: insert on `w`, read it back at once on `r`. Returns how
/// many reads did not see their row.
fn stale_reads(w: &mut mysql::Conn, r: Option<&mut mysql::Conn>, name: &str, rounds: i32) -> usize {
    let mut stale = 0;
    let mut r = r;
    for i in 0..rounds {
        w.query_drop(format!("INSERT INTO {name} VALUES ({i}, {i})"))
            .unwrap();
        let reader: &mut mysql::Conn = match r.as_deref_mut() {
            Some(c) => c,
            None => &mut *w,
        };
        let v: Option<i32> = reader
            .query_first(format!("SELECT v FROM {name} WHERE id = {i}"))
            .unwrap();
        if v != Some(i) {
            stale += 1;
        }
    }
    stale
}

#[test]
fn eventual_reads_are_stale_on_lagging_replicas() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The test setup can see staleness at all: without the guarantee,
    // writes read back at once from delayed replicas are missing.
    let p = proxy("consistency = \"eventual\"");
    let mut c = p.conn();
    table(&mut c, "ev_t");
    // The table must reach the replicas before they are delayed, or the
    // reads below fail on a missing table instead of finding stale rows.
    sync_replicas();
    let _delay = Delay::set(2);
    let stale = stale_reads(&mut c, None, "ev_t", 50);
    eprintln!("eventual: {stale} of 50 reads stale");
    assert!(
        stale > 40,
        "expected stale reads with eventual consistency, got {stale}"
    );
}

#[test]
fn read_your_writes_on_one_connection_and_across_connections() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The default: read_your_writes for all sessions of the user.
    let p = proxy("");
    let mut a = p.conn();
    let mut b = p.conn();
    table(&mut a, "ryw_t");
    table(&mut a, "ryw_u");
    sync_replicas();
    let delay = Delay::set(2);
    let stale = stale_reads(&mut a, None, "ryw_t", 1000);
    assert_eq!(stale, 0, "stale reads on the writing connection");
    let stale = stale_reads(&mut a, Some(&mut b), "ryw_u", 1000);
    assert_eq!(
        stale, 0,
        "stale reads on another connection of the same user"
    );
    // The same with server-side prepared statements (the binary protocol
    // takes another path through sextant).
    table(&mut a, "ryw_p");
    let mut stale = 0;
    for i in 0..300 {
        a.exec_drop("INSERT INTO ryw_p VALUES (?, ?)", (i, i))
            .unwrap();
        let v: Option<i32> = b
            .exec_first("SELECT v FROM ryw_p WHERE id = ?", (i,))
            .unwrap();
        if v != Some(i) {
            stale += 1;
        }
    }
    assert_eq!(stale, 0, "stale reads with prepared statements");
    // Once the replicas have caught up, reads go to them again.
    drop(delay);
    std::thread::sleep(Duration::from_millis(1500));
    let lab = lab();
    let before: i64 = lab
        .replicas
        .iter()
        .map(|&r| status_counter(r, "Com_select") as i64)
        .sum();
    for _ in 0..200 {
        let _: Option<i32> = b.query_first("SELECT v FROM ryw_u WHERE id = 1").unwrap();
    }
    let after: i64 = lab
        .replicas
        .iter()
        .map(|&r| status_counter(r, "Com_select") as i64)
        .sum();
    assert!(
        after - before >= 190,
        "reads did not return to the replicas: {}",
        after - before
    );
}

#[test]
fn session_scope_and_statement_hints() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("consistency_scope = \"session\"");
    let mut a = p.conn();
    let mut b = p.conn();
    table(&mut a, "ss_t");
    sync_replicas();
    let _delay = Delay::set(2);
    assert_eq!(stale_reads(&mut a, None, "ss_t", 100), 0, "own writes");
    // Scope session: another connection is not covered, and reads stale.
    a.query_drop("INSERT INTO ss_t VALUES (5000, 1)").unwrap();
    let v: Option<i32> = b.query_first("SELECT v FROM ss_t WHERE id = 5000").unwrap();
    assert_eq!(v, None, "scope session does not cover other sessions");
    // A statement can ask for more, or less.
    let v: Option<i32> = b
        .query_first("/*# consistency=strong */ SELECT v FROM ss_t WHERE id = 5000")
        .unwrap();
    assert_eq!(v, Some(1));
    a.query_drop("INSERT INTO ss_t VALUES (5001, 1)").unwrap();
    let v: Option<i32> = a
        .query_first("/*# consistency=eventual */ SELECT v FROM ss_t WHERE id = 5001")
        .unwrap();
    assert_eq!(v, None, "an eventual hint reads the (stale) replica");
}

#[test]
fn causal_wait_reads_from_a_replica_once_it_has_the_write() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("causal_wait_ms = 3000");
    let mut c = p.conn();
    table(&mut c, "cw_t");
    sync_replicas();
    // The first read of a new table asks the primary what it is (once).
    c.query_drop("SELECT COUNT(*) FROM cw_t").unwrap();
    let _delay = Delay::set(1);
    let lab = lab();
    let before: i64 = lab
        .replicas
        .iter()
        .map(|&r| status_counter(r, "Com_select") as i64)
        .sum();
    let primary_before = status_counter(lab.primary, "Com_select") as i64;
    assert_eq!(stale_reads(&mut c, None, "cw_t", 3), 0);
    let after: i64 = lab
        .replicas
        .iter()
        .map(|&r| status_counter(r, "Com_select") as i64)
        .sum();
    let primary_after = status_counter(lab.primary, "Com_select") as i64;
    // Each read waited on a replica (MASTER_GTID_WAIT is a SELECT too)
    // and ran there, not on the primary.
    assert!(after - before >= 6, "replica selects: {}", after - before);
    assert!(
        primary_after - primary_before <= 1,
        "primary selects: {}",
        primary_after - primary_before
    );
}

/// Each connection reads row 1 of `table` at the same time; every read
/// must see `v = want`, on a replica.
fn all_read_on_replicas(conns: Vec<mysql::Conn>, table: &str, want: i32, primary_port: i64) {
    let threads: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let sql = format!("SELECT v, @@port FROM {table} WHERE id = 1");
            std::thread::spawn(move || {
                c.query_first::<(Option<i32>, i64), _>(sql)
                    .unwrap()
                    .unwrap()
            })
        })
        .collect();
    let got: Vec<(Option<i32>, i64)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (v, port) in &got {
        assert_eq!(*v, Some(want), "a read missed the write: {got:?}");
        assert_ne!(*port, primary_port, "a read went to the primary: {got:?}");
    }
}

#[test]
fn reads_needing_the_same_write_share_one_wait_per_replica() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("causal_wait_ms = 5000");
    let mut w = p.conn();
    table(&mut w, "sw_t");
    sync_replicas();
    // The first read of a new table asks the primary what it is: done
    // here, so that the readers below arrive together and meet one wait.
    w.query_drop("SELECT COUNT(*) FROM sw_t").unwrap();
    let _delay = Delay::set(1);
    let lab = lab();
    let primary_port = lab.primary as i64;
    let readers = 12;
    // Connected first: the reads start together right after the write.
    let conns: Vec<mysql::Conn> = (0..readers).map(|_| p.conn()).collect();
    w.query_drop("INSERT INTO sw_t VALUES (1, 42)").unwrap();
    // Every read saw the write, on a replica (the one-second delay is well
    // within the budget).
    all_read_on_replicas(conns, "sw_t", 42, primary_port);
    // About one wait per replica; the other reads followed one. (A
    // follower may still send its own: the monitor's reading, taken just
    // before the replica applied the write, can replace the position the
    // wait taught, and the follower then waits itself. Never stale.)
    let waits = stat(&p, "sextant_causal_waits_total");
    let followed = stat(&p, "sextant_causal_followed_waits_total");
    eprintln!("{readers} reads: {waits} waits sent, {followed} followed");
    let most = 2.0 * lab.replicas.len() as f64;
    assert!(waits >= 1.0 && waits <= most, "waits sent: {waits}");
    assert!(waits + followed >= readers as f64, "every read waited");
}

/// `readers` connections read a new row of `table` together while the
/// replicas are two seconds behind, so that every read follows a wait and
/// the followers are released together when it ends.
fn followers_released_together(p: &Proxy, table_name: &str, readers: usize) -> Released {
    let mut w = p.conn();
    table(&mut w, table_name);
    sync_replicas();
    // MASTER_DELAY counts from the write's timestamp, in whole seconds:
    // 2 leaves at least a second in which every read must wait.
    let _delay = Delay::set(2);
    let primary_port = lab().primary as i64;
    // Reads of the new table first, all together: a table the servers'
    // catalogue has not listed yet is no plain read (it might be a view),
    // only plain reads are pipelined, and the replicas' pipes open while
    // reads crowd.
    let warm: Vec<_> = (0..readers)
        .map(|_| {
            let mut c = p.conn();
            let sql = format!("SELECT v FROM {table_name} WHERE id = 0");
            std::thread::spawn(move || {
                for _ in 0..50 {
                    c.query_drop(&sql).unwrap();
                }
                c
            })
        })
        .collect();
    let conns: Vec<mysql::Conn> = warm.into_iter().map(|t| t.join().unwrap()).collect();
    let piped_before = stat(p, "sextant_pipelined_reads_total");
    let pipes = p.backends_sum("pipes") as f64;
    w.query_drop(format!("INSERT INTO {table_name} VALUES (1, 7)"))
        .unwrap();
    all_read_on_replicas(conns, table_name, 7, primary_port);
    let waits = stat(p, "sextant_causal_waits_total");
    let followed = stat(p, "sextant_causal_followed_waits_total");
    let piped = stat(p, "sextant_pipelined_reads_total") - piped_before;
    eprintln!(
        "{readers} reads: {waits} waits sent, {followed} followed, {piped} pipelined on {pipes} pipes"
    );
    assert!(waits + followed >= readers as f64, "every read waited");
    Released {
        followed,
        piped,
        pipes,
    }
}

/// What [`followers_released_together`] counted.
struct Released {
    /// Reads that followed a wait sent by another.
    followed: f64,
    /// Reads that went through pipes.
    piped: f64,
    /// Pipes open when the reads were released.
    pipes: f64,
}

#[test]
fn reads_following_a_wait_share_pipelined_connections() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("causal_wait_ms = 5000");
    // Enough readers that each worker thread has several mid-statement
    // (pipes serve reads only then), all needing the same write.
    let Released {
        followed, piped, ..
    } = followers_released_together(&p, "swp_t", 16);
    // The reads that followed a wait went on through the replicas' pipes
    // (a pipe carries no wait, so only the followers can), not each on a
    // connection of its own.
    assert!(piped >= 4.0, "followers pipelined: {piped} of {followed}");
}

#[test]
fn followers_released_together_queue_deeper_on_the_pipes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // One pipe per worker thread and replica, one read deep: at that
    // depth a burst of followers would find the pipes full and each take
    // a connection of its own; released together they may queue deeper.
    let p = proxy_with(
        "pipeline_depth = 1\npipeline_connections = 1",
        "causal_wait_ms = 5000",
    );
    let r = followers_released_together(&p, "swd_t", 16);
    // (One read per pipe at a time would put as many through them as
    // there are pipes: measured so before reads released together could
    // queue deeper.)
    assert!(r.pipes >= 1.0, "no pipes open after the warm-up");
    assert!(
        r.piped >= 2.0 * r.pipes,
        "followers pipelined: {} of {}, on {} pipes",
        r.piped,
        r.followed,
        r.pipes
    );
}

#[test]
fn reads_that_would_wait_go_to_a_primary_that_takes_reads_while_its_queue_is_shorter() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The primary takes reads (primary_weight = 1) and the replicas are
    // over a second behind (MASTER_DELAY counts from the write's
    // timestamp, in whole seconds: a delay of 1 may be a few ms). Reads
    // that would wait pick by queue: those waiting on a replica count
    // there, so the primary, which answers at once, takes most of them
    // instead of a second's wait each.
    let p = Setup {
        group: "max_replica_lag_ms = 0\nprimary_weight = 1\n[routing]\nhold_ms = 0\ncausal_wait_ms = 5000\n",
        ..Default::default()
    }
    .start();
    let mut w = p.conn();
    table(&mut w, "wq_t");
    sync_replicas();
    let _delay = Delay::set(2);
    let primary_port = lab().primary as i64;
    let readers = 12;
    // Each session's turn starts at the same server: a few reads first
    // (none, one, two) put the readers at different turns.
    let conns: Vec<mysql::Conn> = (0..readers)
        .map(|i| {
            let mut c = p.conn();
            for _ in 0..i % 3 {
                c.query_drop("SELECT v FROM wq_t WHERE id = 0").unwrap();
            }
            c
        })
        .collect();
    w.query_drop("INSERT INTO wq_t VALUES (1, 42)").unwrap();
    let threads: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            std::thread::spawn(move || {
                // One after another: a wait sent counts before the next
                // read picks.
                std::thread::sleep(Duration::from_millis(30 * i as u64));
                let t = std::time::Instant::now();
                let r = c
                    .query_first::<(Option<i32>, i64), _>("SELECT v, @@port FROM wq_t WHERE id = 1")
                    .unwrap()
                    .unwrap();
                (r.0, r.1, t.elapsed())
            })
        })
        .collect();
    let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (v, _, _) in &got {
        assert_eq!(*v, Some(42), "a read missed the write: {got:?}");
    }
    let on_primary = got
        .iter()
        .filter(|(_, port, _)| *port == primary_port)
        .count();
    eprintln!("{on_primary} of {readers} reads on the primary: {got:?}");
    assert!(
        on_primary * 2 > readers,
        "most reads should have gone to the primary, not queued a second on a replica: {got:?}"
    );
}

/// Reads a counter that a direct connection to the primary keeps raising,
/// `reads` times through `c`, with replica 0 current and replica 1 two
/// seconds behind (both in rotation). Halfway, replica 0 goes into
/// maintenance. Returns how many reads saw a smaller value than the read
/// before.
fn backwards_reads(p: &Proxy, c: &mut mysql::Conn, reads: usize) -> usize {
    let lab = lab();
    let mut w = direct(lab.primary);
    w.query_drop("CREATE TABLE IF NOT EXISTS sextant_test.mono (id INT PRIMARY KEY, n BIGINT)")
        .unwrap();
    w.query_drop("REPLACE INTO sextant_test.mono VALUES (1, 0)")
        .unwrap();
    sync_replicas();
    let _restore = RestoreReplication;
    set_delay(lab.replicas[1], 2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                w.query_drop("UPDATE sextant_test.mono SET n = n + 1 WHERE id = 1")
                    .unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Let the delayed replica fall behind.
    std::thread::sleep(Duration::from_millis(2500));
    let mut admin = p.admin();
    let (mut last, mut backwards) = (0i64, 0);
    for i in 0..reads {
        if i == reads / 2 {
            admin
                .query_drop(format!("SET MAINTENANCE ON 127.0.0.1:{}", lab.replicas[0]))
                .unwrap();
        }
        let n: i64 = c
            .query_first("SELECT n FROM sextant_test.mono WHERE id = 1")
            .unwrap()
            .unwrap();
        if n < last {
            backwards += 1;
        }
        last = n;
        std::thread::sleep(Duration::from_millis(5));
    }
    admin
        .query_drop(format!("SET MAINTENANCE OFF 127.0.0.1:{}", lab.replicas[0]))
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    backwards
}

#[test]
fn monotonic_reads_never_go_back_in_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The control: spread over a current and a delayed replica, reads go
    // back and forth in time.
    let p = proxy("consistency = \"eventual\"");
    let mut c = p.conn();
    let back = backwards_reads(&p, &mut c, 300);
    eprintln!("eventual: {back} of 300 reads went back in time");
    assert!(back > 20, "the setup must show the anomaly: {back}");
    drop(c);
    drop(p);

    let p = proxy("consistency = \"monotonic\"");
    let mut c = p.conn();
    let back = backwards_reads(&p, &mut c, 300);
    eprintln!("monotonic: {back} of 300 reads went back in time");
    assert_eq!(back, 0);

    // Per statement, by hint, over an eventual default.
    let p = proxy("consistency = \"eventual\"");
    let mut c = p.conn();
    let lab = lab();
    let before: Vec<u64> = lab
        .replicas
        .iter()
        .map(|&r| status_counter(r, "Com_select"))
        .collect();
    for _ in 0..100 {
        c.query_drop("SELECT /*# consistency=monotonic */ 1")
            .unwrap();
    }
    let got: Vec<u64> = lab
        .replicas
        .iter()
        .zip(&before)
        .map(|(&r, b)| status_counter(r, "Com_select") - b)
        .collect();
    eprintln!("hinted monotonic reads per replica: {got:?}");
    assert!(
        got.iter().any(|&n| n < 20),
        "hinted reads keep to one replica (or ones as far along): {got:?}"
    );
}

/// What a busy application's reads did: how many, where they ran, how
/// many missed the newest row the user had written when they were sent.
#[derive(Debug, Default)]
struct Busy {
    reads: u64,
    on_primary: u64,
    on_replicas: u64,
    stale: u64,
    writes: u64,
}

/// One user, as applications run: 2 connections inserting about 90 rows
/// a second between them, 6 reading by primary key the newest row either
/// writer has committed (3 with text statements, 3 with prepared ones),
/// for `secs`. Each read names the server that answered it (`@@port`).
/// With `bursts`, meanwhile a replica at a time stops applying for
/// 0.1-2 s.
fn busy_writer(p: &Proxy, name: &str, secs: u64, bursts: bool) -> Busy {
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::*};
    use std::sync::Arc;
    let mut c = p.conn();
    c.query_drop(format!("DROP TABLE IF EXISTS {name}"))
        .unwrap();
    c.query_drop(format!(
        "CREATE TABLE {name} (id BIGINT PRIMARY KEY, v BIGINT)"
    ))
    .unwrap();
    c.query_drop(format!("INSERT INTO {name} VALUES (0, 0)"))
        .unwrap();
    sync_replicas();
    let lab = lab();
    let primary = lab.primary as i64;
    let next_id = Arc::new(AtomicI64::new(1));
    let newest = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let [reads, on_primary, on_replicas, stale, writes] =
        std::array::from_fn(|_| Arc::new(AtomicU64::new(0)));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (mut w, next_id, newest, stop, writes) = (
            p.conn(),
            next_id.clone(),
            newest.clone(),
            stop.clone(),
            writes.clone(),
        );
        let sql = format!("INSERT INTO {name} VALUES (?, ?)");
        threads.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let id = next_id.fetch_add(1, SeqCst);
                w.exec_drop(&sql, (id, id)).unwrap();
                // Committed and acknowledged: from now on every read of
                // this user must see it.
                newest.fetch_max(id, SeqCst);
                writes.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(22));
            }
        }));
    }
    for i in 0..6 {
        let (mut r, newest, stop) = (p.conn(), newest.clone(), stop.clone());
        let counters = [&reads, &on_primary, &on_replicas, &stale].map(|a| (*a).clone());
        let sql = format!("SELECT v, @@port FROM {name} WHERE id = ?");
        threads.push(std::thread::spawn(move || {
            let [reads, on_primary, on_replicas, stale] = counters;
            while !stop.load(Relaxed) {
                let want = newest.load(SeqCst);
                let row: Option<(Option<i64>, i64)> = if i % 2 == 0 {
                    r.query_first(sql.replace('?', &want.to_string())).unwrap()
                } else {
                    r.exec_first(&sql, (want,)).unwrap()
                };
                reads.fetch_add(1, Relaxed);
                match row {
                    Some((Some(v), port)) if v == want => {
                        if port == primary {
                            on_primary.fetch_add(1, Relaxed);
                        } else {
                            on_replicas.fetch_add(1, Relaxed);
                        }
                    }
                    _ => {
                        stale.fetch_add(1, Relaxed);
                    }
                }
            }
        }));
    }
    let _restore = RestoreReplication;
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    let mut n = 0u64;
    while std::time::Instant::now() < end {
        if !bursts {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        // A replica stops applying for 0.1-2 s, then catches up.
        n += 1;
        let replica = lab.replicas[(n % lab.replicas.len() as u64) as usize];
        let pause = 100 + (n * 7919) % 1900;
        let mut d = direct(replica);
        d.query_drop("STOP SLAVE SQL_THREAD").unwrap();
        std::thread::sleep(Duration::from_millis(pause));
        d.query_drop("START SLAVE SQL_THREAD").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let busy = Busy {
        reads: reads.load(Relaxed),
        on_primary: on_primary.load(Relaxed),
        on_replicas: on_replicas.load(Relaxed),
        stale: stale.load(Relaxed),
        writes: writes.load(Relaxed),
    };
    eprintln!("{name}: {busy:?}");
    busy
}

#[test]
fn a_busy_writers_reads_stay_on_the_replicas_and_see_its_writes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // sextant's defaults: read_your_writes, scope user, waits on.
    let p = Setup::default().start();
    let b = busy_writer(&p, "busy_ryw", 8, false);
    assert!(b.writes > 400, "the writers wrote too little: {b:?}");
    assert_eq!(b.stale, 0, "reads missed the user's newest row: {b:?}");
    assert!(
        b.on_replicas * 100 >= b.reads * 95,
        "fewer than 95% of reads on the replicas: {b:?}"
    );
    // The waits and what they cost are counted.
    let waits = stat(&p, "sextant_causal_waits_total");
    assert!(waits > 0.0, "no waits counted");
    // A wait that caught up teaches sextant the replica's position: the
    // other reads needing that write go there without one.
    eprintln!("waits: {waits} for {} reads", b.reads);
    assert!(
        waits < b.reads as f64 / 4.0,
        "most reads should need no wait: {waits} waits, {b:?}"
    );
    // EXPLAIN ROUTE says when such a read waits, and for how long.
    let row: mysql::Row = p
        .admin()
        .query_first("EXPLAIN ROUTE SELECT v FROM busy_ryw WHERE id = 1")
        .unwrap()
        .unwrap();
    let wait: String = row.get("wait").unwrap();
    assert!(wait.contains("waits up to 50 ms"), "{wait}");
}

#[test]
fn a_busy_writers_reads_fall_back_to_the_primary_when_replicas_stall() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Replicas stop applying in bursts of 0.1-2 s: waits time out and
    // those reads go to the primary; none is stale.
    let p = Setup::default().start();
    let b = busy_writer(&p, "busy_bursts", 10, true);
    assert_eq!(b.stale, 0, "reads missed the user's newest row: {b:?}");
    assert!(b.on_primary > 0, "no read fell back to the primary: {b:?}");
    assert!(b.on_replicas > 0, "no read ran on a replica: {b:?}");
    let timeouts = stat(&p, "sextant_causal_wait_timeouts_total");
    let fallbacks = stat(&p, "sextant_causal_primary_reads_total");
    eprintln!("wait timeouts: {timeouts}, reads sent to the primary: {fallbacks}");
    assert!(timeouts > 0.0, "no wait timed out");
    assert!(fallbacks > 0.0, "no read counted as sent to the primary");
}

/// A counter of SHOW STATS, summed over its labels.
fn stat(p: &Proxy, name: &str) -> f64 {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW STATS").unwrap();
    rows.into_iter()
        .filter(|r| r.get::<String, _>(0).as_deref() == Some(name))
        .map(|r| {
            r.get::<Option<String>, _>(2)
                .flatten()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        })
        .sum()
}

/// Rows of a text result read by `Raw` without CLIENT_DEPRECATE_EOF (as
/// PyMySQL and libmariadb read them): the first column of each row.
fn first_column(resp: &[Vec<u8>]) -> Vec<String> {
    let eofs: Vec<usize> = resp
        .iter()
        .enumerate()
        .filter(|(_, p)| p.first() == Some(&0xfe) && p.len() < 9)
        .map(|(i, _)| i)
        .collect();
    assert!(eofs.len() >= 2, "a result set: {resp:?}");
    resp[eofs[0] + 1..eofs[1]]
        .iter()
        .map(|row| {
            let n = row[0] as usize;
            String::from_utf8_lossy(&row[1..1 + n]).into_owned()
        })
        .collect()
}

/// A write answered by rows (INSERT ... RETURNING, as Django creates
/// rows on MariaDB) by a client without CLIENT_DEPRECATE_EOF, whose answer
/// ends with an EOF and so carries no GTID: the next read, on the same
/// connection or another of the same user, sees the row, with the replicas
/// two seconds behind and in rotation. (Both read the delayed replica:
/// 5 of 5 stale.)
#[test]
fn a_write_answered_by_rows_is_read_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("causal_wait_ms = 5000");
    let mut other = p.conn();
    other
        .query_drop("CREATE TABLE IF NOT EXISTS ret_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    sync_replicas();
    let _delay = Delay::set(2);
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    let mut stale = Vec::new();
    for i in 0..5 {
        r.query(&format!("INSERT INTO ret_t (v) VALUES ({i}) RETURNING id"));
        let id = first_column(&r.read_response())[0].clone();
        r.query(&format!("SELECT v FROM ret_t WHERE id = {id}"));
        let same = first_column(&r.read_response());
        let v: Option<i32> = other
            .query_first(format!("SELECT v FROM ret_t WHERE id = {id}"))
            .unwrap();
        if same != [i.to_string()] || v != Some(i) {
            stale.push((id, same, v));
        }
    }
    assert!(
        stale.is_empty(),
        "stale reads after INSERT ... RETURNING: {stale:?}"
    );
}

/// The same for a prepared INSERT ... RETURNING (COM_STMT_EXECUTE, rows in
/// the binary protocol, the answer ended by an EOF): the GTID is asked
/// for after the execution too. (Without that, reads of the row returned
/// were stale on the delayed replicas.)
#[test]
fn a_prepared_write_answered_by_rows_is_read_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = proxy("causal_wait_ms = 5000");
    let mut other = p.conn();
    other
        .query_drop("CREATE TABLE IF NOT EXISTS retp_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .unwrap();
    sync_replicas();
    let _delay = Delay::set(2);
    let mut r = Raw::login(p.port, "app", "apppass", Some("sextant_test"));
    let mut prepare = vec![0x16];
    prepare.extend_from_slice(b"INSERT INTO retp_t (v) VALUES (?) RETURNING id");
    r.send(0, &prepare);
    let ok = r.read_response_as(sextant_protocol::tracker::Expect::Prepare);
    assert_eq!(ok[0][0], 0, "prepared: {:?}", ok[0]);
    let id = u32::from_le_bytes([ok[0][1], ok[0][2], ok[0][3], ok[0][4]]);
    let mut stale = Vec::new();
    for i in 0..5i32 {
        // MYSQL_TYPE_LONG, the value little-endian.
        r.execute_one(id, 3, &i.to_le_bytes());
        let resp = r.read_response_as(sextant_protocol::tracker::Expect::Execute);
        // The one binary row: 0x00, a null bitmap of one byte, the INT.
        let row = resp
            .iter()
            .find(|p| p.first() == Some(&0) && p.len() == 6)
            .unwrap_or_else(|| panic!("a binary row in {resp:?}"));
        let new_id = i32::from_le_bytes([row[2], row[3], row[4], row[5]]);
        r.query(&format!("SELECT v FROM retp_t WHERE id = {new_id}"));
        let same = first_column(&r.read_response());
        let v: Option<i32> = other
            .query_first(format!("SELECT v FROM retp_t WHERE id = {new_id}"))
            .unwrap();
        if same != [i.to_string()] || v != Some(i) {
            stale.push((new_id, same, v));
        }
    }
    assert!(
        stale.is_empty(),
        "stale reads after a prepared INSERT ... RETURNING: {stale:?}"
    );
}
