//! Real client libraries through sextant against real MariaDB: the mariadb
//! command-line client (libmariadb, C), PyMySQL (Python), and the `mysql`
//! crate (Rust, binary protocol for prepared statements).

mod common;
use common::*;
use mysql::prelude::Queryable;

#[test]
fn cli_basic_multi_statements_and_procedures() {
    let p = Setup::default().start();
    let out = cli(
        p.port,
        "app",
        "apppass",
        &["-N", "-B", "-e", "SELECT 1+1; SELECT 'two'"],
        None,
    );
    assert_eq!(assert_ok(&out, "cli"), "2\ntwo\n");

    // A procedure returning two result sets (multi-results), created and
    // called through sextant.
    let script = "USE sextant_test;
        DROP PROCEDURE IF EXISTS two_sets;
        DELIMITER //
        CREATE PROCEDURE two_sets() BEGIN SELECT 'first'; SELECT 'second'; END //
        DELIMITER ;
        CALL two_sets();
        SELECT 'after';";
    let out = cli(p.port, "app", "apppass", &["-N", "-B"], Some(script));
    assert_eq!(assert_ok(&out, "cli procedure"), "first\nsecond\nafter\n");
}

#[test]
fn cli_load_data_local_infile() {
    let p = Setup::default().start();
    let csv = lab().dir.join("load.csv");
    let rows: String = (1..=5000).map(|i| format!("{i},name-{i}\n")).collect();
    std::fs::write(&csv, rows).unwrap();
    let script = format!(
        "USE sextant_test; DROP TABLE IF EXISTS loaded; CREATE TABLE loaded (id int primary key, name varchar(40));
         LOAD DATA LOCAL INFILE '{}' INTO TABLE loaded FIELDS TERMINATED BY ',';
         SELECT COUNT(*), SUM(id) FROM loaded FOR UPDATE;",
        csv.display()
    );
    let out = cli(
        p.port,
        "app",
        "apppass",
        &["-N", "-B", "--local-infile=1"],
        Some(&script),
    );
    assert_eq!(assert_ok(&out, "load data"), "5000\t12502500\n");
}

#[test]
fn cli_wrong_password_and_unknown_user_get_1045() {
    let p = Setup::default().start();
    for (user, pass) in [("app", "wrong"), ("nobody", "x")] {
        let out = cli(p.port, user, pass, &["-e", "SELECT 1"], None);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("1045") && err.contains("Access denied"),
            "{err}"
        );
        assert!(err.contains(&format!("'{user}'")), "{err}");
    }
    // The proxy still serves everyone else.
    let out = cli(p.port, "app", "apppass", &["-N", "-e", "SELECT 7"], None);
    assert_eq!(assert_ok(&out, "after failures").trim(), "7");
}

#[test]
fn admin_tool_ping_and_statistics() {
    let p = Setup::default().start();
    let run = |cmd: &str| {
        std::process::Command::new("mariadb-admin")
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "--protocol=tcp",
                "-uapp",
                "-papppass",
            ])
            .arg(format!("-P{}", p.port))
            .arg(cmd)
            .output()
            .expect("mariadb-admin")
    };
    assert!(assert_ok(&run("ping"), "ping").contains("alive"));
    // COM_STATISTICS answers with the server's status line.
    assert!(assert_ok(&run("status"), "status").contains("Uptime"));
}

#[test]
fn pymysql_session_big_packets_transactions_infile() {
    let p = Setup::default().start();
    let script = r#"
import os, pymysql
from pymysql.constants import CLIENT
port = int(os.environ['PORT'])
c = pymysql.connect(host='127.0.0.1', port=port, user='app', password='apppass',
                    database='sextant_test', local_infile=True, autocommit=True,
                    client_flag=CLIENT.MULTI_STATEMENTS, max_allowed_packet=64 << 20)
cur = c.cursor()
cur.execute("DROP TABLE IF EXISTS py_t")
cur.execute("CREATE TABLE py_t (id int primary key, v longblob)")

# Session state follows the client.
cur.execute("SET NAMES latin1")
cur.execute("SELECT @@character_set_client, @@character_set_results")
assert cur.fetchone() == ('latin1', 'latin1'), 'charset'
cur.execute("SET NAMES utf8mb4")

# COM_PING and COM_INIT_DB.
c.ping(reconnect=False)
c.select_db('sbtest')
cur.execute("SELECT DATABASE()")
assert cur.fetchone()[0] == 'sbtest', 'init db'
c.select_db('sextant_test')

# A 20 MiB value: the client splits the packet, the server splits the row.
big = b'xyz' * (7 << 20)
cur.execute("INSERT INTO py_t VALUES (1, %s)", (big,))
cur.execute("/*#mode=READWRITE*/ SELECT LENGTH(v), v FROM py_t WHERE id = 1")
n, v = cur.fetchone()
assert n == len(big) and v == big, 'big value round trip'

# Multi-statements and multiple result sets.
cur.execute("SELECT 1; SELECT 2, 3")
assert cur.fetchall() == ((1,),)
assert cur.nextset()
assert cur.fetchall() == ((2, 3),)

# A rolled-back transaction leaves nothing behind.
c.begin()
cur.execute("INSERT INTO py_t VALUES (2, 'r')")
c.rollback()
cur.execute("/*#mode=READWRITE*/ SELECT COUNT(*) FROM py_t WHERE id = 2")
assert cur.fetchone()[0] == 0, 'rollback'

# LOAD DATA LOCAL INFILE.
path = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'py_infile_%d.csv' % os.getpid())
with open(path, 'w') as f:
    for i in range(10, 1010):
        f.write('%d,row%d\n' % (i, i))
cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE py_t FIELDS TERMINATED BY ','", (path,))
os.unlink(path)
cur.execute("/*#mode=READWRITE*/ SELECT COUNT(*) FROM py_t WHERE id >= 10")
assert cur.fetchone()[0] == 1000, 'infile'

# Server errors reach the client unchanged.
try:
    cur.execute("SELECT * FROM no_such_table")
    raise SystemExit('expected an error')
except pymysql.err.ProgrammingError as e:
    assert e.args[0] == 1146, e
cur.execute("SELECT 'still fine'")
assert cur.fetchone()[0] == 'still fine'
print("OK")
"#;
    let out = python(p.port, script);
    assert_eq!(assert_ok(&out, "pymysql").trim(), "OK");
}

#[test]
fn rust_client_prepared_statements_across_connections() {
    // hold_ms = 0 and a small pool: every statement may land on a different
    // server connection, so client statements must be re-prepared there.
    let p = Setup {
        group: "[routing]\nhold_ms = 0\n",
        ..Default::default()
    }
    .start();
    let mut setup = p.conn();
    setup.query_drop("DROP TABLE IF EXISTS ps_t").unwrap();
    setup
        .query_drop("CREATE TABLE ps_t (id int primary key, name varchar(20), score double)")
        .unwrap();
    let mut conns: Vec<mysql::Conn> = (0..4).map(|_| p.conn()).collect();
    let insert = "INSERT INTO ps_t VALUES (?, ?, ?)";
    for i in 0..200i32 {
        let c = &mut conns[i as usize % 4];
        c.exec_drop(insert, (i, format!("n{i}"), i as f64 / 2.0))
            .unwrap();
    }
    sync_replicas();
    for i in 0..200i32 {
        let c = &mut conns[(i as usize + 1) % 4];
        let row: Option<(i32, String, f64)> = c
            .exec_first("SELECT id, name, score FROM ps_t WHERE id = ?", (i,))
            .unwrap();
        assert_eq!(row, Some((i, format!("n{i}"), i as f64 / 2.0)));
    }
    // NULL parameters and a statement with no parameters.
    conns[0]
        .exec_drop(insert, (500, None::<String>, None::<f64>))
        .unwrap();
    let n: Option<i64> = conns[1]
        .exec_first(
            "/*#mode=READWRITE*/ SELECT COUNT(*) FROM ps_t WHERE name IS NULL",
            (),
        )
        .unwrap();
    assert_eq!(n, Some(1));
    // A statement that fails at execution keeps the session usable.
    let dup = conns[2].exec_drop(insert, (1, "dup", 0.0));
    assert!(format!("{dup:?}").contains("1062"), "{dup:?}");
    let one: Option<i32> = conns[2].exec_first("SELECT ?", (1,)).unwrap();
    assert_eq!(one, Some(1));
}

#[test]
fn rust_client_change_user_reset_and_ping() {
    let p = Setup::default().start();
    let mut c = p.conn();
    c.query_drop("SET @secret = 42").unwrap();
    c.query_drop("SET SESSION sql_mode = 'ANSI'").unwrap();
    let v: Option<i64> = c.query_first("SELECT @secret").unwrap();
    assert_eq!(v, Some(42));
    assert!(c.ping().is_ok());

    // COM_RESET_CONNECTION: variables gone, session usable.
    c.reset().unwrap();
    let v: Option<Option<i64>> = c.query_first("SELECT @secret").unwrap();
    assert_eq!(v, Some(None));
    let mode: Option<String> = c.query_first("SELECT @@session.sql_mode").unwrap();
    assert!(!mode.unwrap().contains("ANSI"));

    // COM_CHANGE_USER to another proxy user.
    c.change_user(
        mysql::ChangeUserOpts::default()
            .with_user(Some("other".into()))
            .with_pass(Some("otherpass".into()))
            .with_db_name(Some("sbtest".into())),
    )
    .unwrap();
    let db: Option<String> = c.query_first("SELECT DATABASE()").unwrap();
    assert_eq!(db.as_deref(), Some("sbtest"));
    let bad = c.change_user(
        mysql::ChangeUserOpts::default()
            .with_user(Some("other".into()))
            .with_pass(Some("wrong".into())),
    );
    assert!(format!("{bad:?}").contains("1045"), "{bad:?}");

    // COM_INIT_DB to a database that does not exist: the server's error.
    let mut c = p.conn();
    let e = c.select_db("sextant_no_such_db");
    assert!(format!("{e:?}").contains("1049"), "{e:?}");
    let one: Option<i32> = c.query_first("SELECT 1").unwrap();
    assert_eq!(one, Some(1));
}

/// The mariadb client's Ctrl-C sends `KILL QUERY <its connection id>` on a
/// new connection: through sextant it cancels the running statement within
/// a second, as it does against the server, and touches no other thread.
#[test]
fn cli_ctrl_c_cancels_the_running_query() {
    let p = Setup::default().start();
    let mut child = std::process::Command::new("mariadb")
        .args(["--no-defaults", "-h127.0.0.1", "--protocol=tcp"])
        .arg(format!("-P{}", p.port))
        .args(["-uapp", "-papppass", "-e", "SELECT SLEEP(10)"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mariadb client");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let t0 = std::time::Instant::now();
    // SAFETY: a signal to the child process just spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let mut killed = false;
    while t0.elapsed() < std::time::Duration::from_secs(5) {
        if child.try_wait().expect("wait").is_some() {
            killed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !killed {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(killed, "SLEEP(10) still running 5 s after Ctrl-C: {stderr}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(2),
        "cancelled only after {:?}",
        t0.elapsed()
    );
    assert!(
        stderr.contains("1317") || stderr.contains("killed"),
        "{stderr}"
    );
    for &r in &lab().replicas {
        let rows: Vec<mysql::Row> = direct(r).query("SHOW SLAVE STATUS").unwrap();
        let io: String = rows[0].get("Slave_IO_Running").unwrap();
        assert_eq!(io, "Yes", "replication on {r}");
    }
}

#[test]
fn ed25519_accounts_on_both_sides() {
    ed25519_account();
    // The reference: the mariadb client logs in to the server directly.
    let who = ["-N", "-B", "-e", "SELECT CURRENT_USER()"];
    let out = cli(lab().primary, "ed_app", "ed-secret", &who, None);
    assert_eq!(assert_ok(&out, "direct ed25519 login"), "ed_app@%\n");

    let p = Setup {
        users: r#"
[[users]]
name = "ed_backend"
password = "front-pass"
backend_user = "ed_app"
backend_password = "ed-secret"

[[users]]
name = "ed_front"
password = "front-ed"
auth_plugin = "ed25519"
backend_user = "app"
backend_password = "apppass"
"#,
        ..Default::default()
    }
    .start();
    // To the servers: sextant logs in as ed_app on replicas (reads) and on
    // the primary (a transaction).
    let url = p.url("ed_backend", "front-pass", "sextant_test");
    let mut c = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
    for _ in 0..4 {
        let u: Option<String> = c.query_first("SELECT CURRENT_USER()").unwrap();
        assert_eq!(u.as_deref(), Some("ed_app@%"));
    }
    c.query_drop("BEGIN").unwrap();
    let u: Option<String> = c.query_first("SELECT CURRENT_USER()").unwrap();
    c.query_drop("COMMIT").unwrap();
    assert_eq!(u.as_deref(), Some("ed_app@%"));
    assert!(p.backends_sum("conn_open") >= 2);

    // From clients: sextant asks a user configured with ed25519 to switch
    // to client_ed25519 with a 32-byte nonce, as MariaDB does...
    let mut r = Raw::connect(p.port);
    let (_, greeting) = r.read().unwrap();
    let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting).unwrap();
    let mut resp = Vec::new();
    sextant_protocol::handshake::HandshakeResponse {
        zstd_level: 0,
        mariadb_caps: 0,
        capabilities: CAPS,
        max_packet: 1 << 24,
        charset: 45,
        user: "ed_front".into(),
        auth_response: sextant_protocol::auth::native_scramble(b"front-ed", &hs.nonce),
        database: None,
        auth_plugin: Some("mysql_native_password".into()),
        attrs: vec![],
    }
    .encode(&mut resp);
    r.send(1, &resp);
    let (seq, switch) = r.read().unwrap();
    assert_eq!(&switch[..16], b"\xfeclient_ed25519\0", "{switch:?}");
    assert_eq!(switch.len(), 16 + 32);
    let sig = sextant_protocol::auth::ed25519_sign(b"front-ed", &switch[16..]);
    r.send(seq + 1, &sig);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
    // ...and MariaDB's own client logs in with it, or is refused.
    let out = cli(p.port, "ed_front", "front-ed", &who, None);
    assert_eq!(assert_ok(&out, "ed25519 login to sextant"), "app@%\n");
    let out = cli(p.port, "ed_front", "wrong", &who, None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1045") && err.contains("ed_front"), "{err}");
}

/// A native-password login that keeps the greeting's scramble (which a
/// COM_CHANGE_USER answers) and the session id.
fn login_keeping_nonce(port: u16, user: &str, pass: &str, db: Option<&str>) -> (Raw, Vec<u8>, u32) {
    let mut r = Raw::connect(port);
    let (_, greeting) = r.read().unwrap();
    let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting).unwrap();
    let mut resp = Vec::new();
    sextant_protocol::handshake::HandshakeResponse {
        zstd_level: 0,
        mariadb_caps: 0,
        capabilities: CAPS,
        max_packet: 1 << 24,
        charset: 45,
        user: user.into(),
        auth_response: sextant_protocol::auth::native_scramble(pass.as_bytes(), &hs.nonce),
        database: db.map(Into::into),
        auth_plugin: Some("mysql_native_password".into()),
        attrs: vec![],
    }
    .encode(&mut resp);
    r.send(1, &resp);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
    (r, hs.nonce.to_vec(), hs.connection_id)
}

/// Sends COM_CHANGE_USER with a mysql_native_password answer to `nonce`.
fn send_change_user(r: &mut Raw, user: &str, pass: &str, nonce: &[u8], db: Option<&str>) {
    let scramble = sextant_protocol::auth::native_scramble(pass.as_bytes(), nonce);
    let mut p = vec![0x11];
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    p.push(scramble.len() as u8);
    p.extend_from_slice(&scramble);
    p.extend_from_slice(db.unwrap_or("").as_bytes());
    p.push(0);
    p.extend_from_slice(&45u16.to_le_bytes());
    p.extend_from_slice(b"mysql_native_password\0");
    r.send(0, &p);
}

/// The sextant user SHOW SESSIONS gives for session `id`.
fn session_user(p: &Proxy, id: u32) -> String {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW SESSIONS").unwrap();
    rows.iter()
        .find(|r| r.get::<String, _>("id").as_deref() == Some(&id.to_string()))
        .and_then(|r| r.get::<String, _>("user"))
        .expect("the session is listed")
}

fn select_one_works(r: &mut Raw) {
    r.query("SELECT 1");
    let res = r.read_response();
    assert_ne!(res[0][0], 0xff, "{}", String::from_utf8_lossy(&res[0]));
}

/// COM_CHANGE_USER is checked as a login is, and one that fails leaves the
/// session open as its old user (as MariaDB does): the new user's
/// max_connections (1226), its auth plugin (client_ed25519 is asked for),
/// its database (1049), its password (1045).
#[test]
fn change_user_is_checked_like_a_login_and_a_failed_one_keeps_the_old_user() {
    let p = Setup {
        users: r#"
[[users]]
name = "few"
password = "fewpass"
max_connections = 2
backend_user = "app"
backend_password = "apppass"

[[users]]
name = "ed_front"
password = "front-ed"
auth_plugin = "ed25519"
backend_user = "app"
backend_password = "apppass"
"#,
        ..Default::default()
    }
    .start();
    let (mut r, nonce, id) = login_keeping_nonce(p.port, "app", "apppass", Some("sextant_test"));
    assert_eq!(session_user(&p, id), "app");

    // The user's limit counts sessions that changed to it.
    let url = p.url("few", "fewpass", "sextant_test");
    let few: Vec<mysql::Conn> = (0..2)
        .map(|_| mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap())
        .collect();
    send_change_user(&mut r, "few", "fewpass", &nonce, None);
    let (_, e) = r.read().unwrap();
    assert_eq!(err_of(&e).0, 1226, "{}", String::from_utf8_lossy(&e));
    assert_eq!(session_user(&p, id), "app");
    select_one_works(&mut r);
    drop(few);
    std::thread::sleep(std::time::Duration::from_millis(200));
    send_change_user(&mut r, "few", "fewpass", &nonce, Some("sextant_test"));
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
    assert_eq!(session_user(&p, id), "few");
    // ...and the changed session holds one of its seats: a third login
    // of it would be one too many.
    let _second = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap()).unwrap();
    let third = mysql::Conn::new(mysql::Opts::from_url(&url).unwrap());
    assert!(format!("{third:?}").contains("1226"), "{third:?}");

    // A database the new user cannot use: refused, the old user stays,
    // with its database.
    send_change_user(&mut r, "app", "apppass", &nonce, Some("sextant_no_such_db"));
    let (_, e) = r.read().unwrap();
    assert_eq!(err_of(&e).0, 1049, "{}", String::from_utf8_lossy(&e));
    assert_eq!(session_user(&p, id), "few");
    r.query("SELECT DATABASE()");
    let res = r.read_response();
    assert!(
        String::from_utf8_lossy(&res[res.len() - 2]).contains("sextant_test"),
        "{res:?}"
    );

    // A wrong password: 1045, and the session goes on as before.
    send_change_user(&mut r, "app", "wrong", &nonce, None);
    let (_, e) = r.read().unwrap();
    assert_eq!(err_of(&e).0, 1045, "{}", String::from_utf8_lossy(&e));
    assert_eq!(session_user(&p, id), "few");
    select_one_works(&mut r);

    // A user configured with ed25519 is asked for client_ed25519, as at
    // login, whatever plugin the change-user named.
    send_change_user(&mut r, "ed_front", "front-ed", &nonce, None);
    let (seq, switch) = r.read().unwrap();
    assert_eq!(&switch[..16], b"\xfeclient_ed25519\0", "{switch:?}");
    assert_eq!(switch.len(), 16 + 32);
    let bad = sextant_protocol::auth::ed25519_sign(b"not-it", &switch[16..]);
    r.send(seq + 1, &bad);
    let (_, e) = r.read().unwrap();
    assert_eq!(err_of(&e).0, 1045, "{}", String::from_utf8_lossy(&e));
    assert_eq!(session_user(&p, id), "few");
    send_change_user(&mut r, "ed_front", "front-ed", &nonce, None);
    let (seq, switch) = r.read().unwrap();
    let sig = sextant_protocol::auth::ed25519_sign(b"front-ed", &switch[16..]);
    r.send(seq + 1, &sig);
    let (_, ok) = r.read().unwrap();
    assert_eq!(ok[0], 0, "{}", String::from_utf8_lossy(&ok));
    assert_eq!(session_user(&p, id), "ed_front");
    select_one_works(&mut r);
}
