//! TLS on both sides and caching_sha2_password, with real clients (the
//! mariadb CLI, PyMySQL with the cryptography package) and real MariaDB.

mod common;
use common::*;
use mysql::prelude::Queryable;

fn tls_proxy(extra_proxy: &str, users: &str) -> Proxy {
    let lab = lab();
    let proxy = format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n{extra_proxy}",
        lab.tls_cert, lab.tls_key
    );
    Setup {
        proxy: &proxy,
        users,
        ..Default::default()
    }
    .start()
}

const PY_TLS: &str = r#"
import os, sys, pymysql
port = int(os.environ['PORT'])
mode, user, password = sys.argv[1], sys.argv[2], sys.argv[3]
ssl = {'ca': os.environ['CA']} if mode == 'tls' else None
try:
    c = pymysql.connect(host='127.0.0.1', port=port, user=user, password=password, ssl=ssl)
except pymysql.err.OperationalError as e:
    print('ERROR', e.args[0], e.args[1])
    raise SystemExit(0)
cur = c.cursor()
cur.execute("SELECT 40 + 2")
tls = c._sock.version() if hasattr(c._sock, 'version') else 'none'
print('OK', cur.fetchone()[0], tls, c._auth_plugin_name)
"#;

fn py(p: &Proxy, mode: &str, user: &str, password: &str) -> String {
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", PY_TLS, mode, user, password])
        .env("PORT", p.port.to_string())
        .env("CA", &lab().tls_ca)
        .output()
        .expect("python3");
    assert_ok(&out, "pymysql").trim().to_string()
}

#[test]
fn clients_connect_over_verified_tls() {
    let p = tls_proxy("", "");
    // The CLI verifies sextant's certificate against the lab CA.
    let out = cli(
        p.port,
        "app",
        "apppass",
        &[
            "-N",
            "-B",
            "--ssl",
            &format!("--ssl-ca={}", lab().tls_ca),
            "--ssl-verify-server-cert",
            "-e",
            "SELECT 'secure'",
        ],
        None,
    );
    assert_eq!(assert_ok(&out, "cli over TLS").trim(), "secure");
    let r = py(&p, "tls", "app", "apppass");
    assert!(r.starts_with("OK 42 TLSv1."), "{r}");
    // Plain connections still work when TLS is offered, not required.
    let r = py(&p, "plain", "app", "apppass");
    assert!(r.starts_with("OK 42 none"), "{r}");
}

#[test]
fn require_tls_globally_and_per_user() {
    let p = tls_proxy("require_tls = true", "");
    let r = py(&p, "plain", "app", "apppass");
    assert!(r.starts_with("ERROR 3159"), "{r}");
    assert!(py(&p, "tls", "app", "apppass").starts_with("OK 42 TLS"));

    let p = tls_proxy("", "[[users]]\nname = \"secure\"\npassword = \"sp\"\nbackend_user = \"app\"\nbackend_password = \"apppass\"\nrequire_tls = true\n");
    let r = py(&p, "plain", "secure", "sp");
    assert!(r.starts_with("ERROR 3159") && r.contains("secure"), "{r}");
    assert!(py(&p, "tls", "secure", "sp").starts_with("OK 42 TLS"));
    assert!(py(&p, "plain", "app", "apppass").starts_with("OK 42"));
}

#[test]
fn caching_sha2_full_authentication_rsa_and_tls() {
    let key = repo_root().join("crates/net/testdata/rsa_test_key.pem");
    let extra = format!(
        "auth_plugin = \"caching_sha2_password\"\nsha2_full_auth = \"always\"\nrsa_key = \"{}\"",
        key.display()
    );
    let p = tls_proxy(&extra, "");
    // Without TLS: the client fetches sextant's public key and sends the
    // password RSA-encrypted.
    let r = py(&p, "plain", "app", "apppass");
    assert_eq!(r, "OK 42 none caching_sha2_password");
    // Over TLS: the password in clear inside TLS.
    let r = py(&p, "tls", "app", "apppass");
    assert!(
        r.starts_with("OK 42 TLS") && r.ends_with("caching_sha2_password"),
        "{r}"
    );
    // Wrong passwords fail on both paths.
    assert!(py(&p, "plain", "app", "nope").starts_with("ERROR 1045"));
    assert!(py(&p, "tls", "app", "nope").starts_with("ERROR 1045"));
    // libmariadb's caching_sha2 plugin over TLS.
    let out = cli(
        p.port,
        "app",
        "apppass",
        &["-N", "-B", "--ssl", "-e", "SELECT 'sha2'"],
        None,
    );
    assert_eq!(assert_ok(&out, "cli caching_sha2 over TLS").trim(), "sha2");

    // "first": full authentication once, then the fast path.
    let extra = format!(
        "auth_plugin = \"caching_sha2_password\"\nsha2_full_auth = \"first\"\nrsa_key = \"{}\"",
        key.display()
    );
    let p = tls_proxy(&extra, "");
    for _ in 0..3 {
        assert_eq!(
            py(&p, "plain", "app", "apppass"),
            "OK 42 none caching_sha2_password"
        );
    }
}

#[test]
fn tls_to_the_servers() {
    let lab = lab();
    // Verified against the lab CA.
    let group = format!("tls = true\ntls_ca = \"{}\"\n", lab.tls_ca);
    let p = Setup {
        group: &group,
        ..Default::default()
    }
    .start();
    // SHOW STATUS describes the client's own connection; the server
    // connection's TLS shows in information_schema.
    let q = "SELECT 'Ssl_version', VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = 'Ssl_version'";
    let mut c = p.conn();
    for _ in 0..3 {
        let v: Option<(String, String)> = c.query_first(q).unwrap();
        let v = v.unwrap().1;
        assert!(
            v.starts_with("TLSv1."),
            "server connection not encrypted: {v:?}"
        );
        let w: Option<(String, String)> =
            c.query_first(format!("/*#mode=READWRITE*/ {q}")).unwrap();
        assert!(w.unwrap().1.starts_with("TLSv1."));
    }
    // Encrypted without verification.
    let p = Setup {
        group: "tls = true\n",
        ..Default::default()
    }
    .start();
    let v: Option<(String, String)> = p.conn().query_first(q).unwrap();
    assert!(v.unwrap().1.starts_with("TLSv1."));
    // A CA that did not sign the servers' certificates: refused, clearly.
    let group = format!("tls = true\ntls_ca = \"{}\"\n", lab.tls_cert);
    let p = Setup {
        group: &group,
        ..Default::default()
    }
    .start();
    let mut r = Raw::login(p.port, "app", "apppass", None);
    r.query("SELECT 1");
    let resp = r.read_response();
    let (code, msg) = err_of(&resp[0]);
    assert_eq!(code, 9001, "{msg}");
    assert!(
        msg.contains("TLS") && msg.to_lowercase().contains("cert"),
        "{msg}"
    );
}

/// Without a configured certificate sextant still offers TLS, with one it
/// makes at start: a client that asks for TLS gets it. With
/// `tls_self_signed = false` it offers none.
#[test]
fn tls_is_offered_without_a_configured_certificate() {
    let p = Setup::default().start();
    let out = cli(p.port, "app", "apppass", &["--ssl", "-e", "status"], None);
    let text = assert_ok(&out, "mariadb --ssl through sextant without tls_cert");
    assert!(
        text.contains("Cipher in use is"),
        "the client's connection is not encrypted:\n{text}"
    );
    assert!(p.logs().contains("self-signed certificate"));
    let p = Setup {
        proxy: "tls_self_signed = false",
        ..Default::default()
    }
    .start();
    let mut r = Raw::connect(p.port);
    let (_, greeting) = r.read().expect("greeting");
    let hs = sextant_protocol::handshake::InitialHandshake::parse(&greeting).unwrap();
    assert_eq!(
        hs.capabilities & sextant_protocol::consts::cap::SSL,
        0,
        "TLS offered"
    );
}

#[test]
fn status_rows_describe_the_clients_own_connection() {
    // SHOW STATUS answers TLS and compression for the client's connection
    // (not sextant's server connection), as the server answers a direct
    // client: with and without TLS, with and without compression.
    let p = Setup::default().start();
    let q = "SHOW SESSION STATUS WHERE Variable_name IN \
             ('Ssl_version', 'Ssl_verify_mode', 'Ssl_verify_depth', 'Ssl_default_timeout', 'Compression')";
    for opts in [
        &["--ssl", "--ssl-verify-server-cert=0", "--compress"][..],
        &["--ssl", "--ssl-verify-server-cert=0"][..],
        &["--skip-ssl", "--compress"][..],
        &["--skip-ssl"][..],
    ] {
        let run = |port: u16| {
            let mut args = vec!["-N", "-B", "-e", q];
            args.extend_from_slice(opts);
            assert_ok(&cli(port, "app", "apppass", &args, None), "SHOW STATUS")
        };
        let want = run(lab().primary);
        assert_eq!(want.contains("TLSv1"), opts[0] == "--ssl", "{want}");
        assert_eq!(run(p.port), want, "{opts:?}");
        // The cipher: one in use over TLS, none without.
        let cipher = assert_ok(
            &cli(
                p.port,
                "app",
                "apppass",
                &[
                    &["-N", "-B", "-e", "SHOW STATUS LIKE 'Ssl_cipher'"][..],
                    opts,
                ]
                .concat(),
                None,
            ),
            "Ssl_cipher",
        );
        assert_eq!(
            cipher.trim() != "Ssl_cipher",
            opts[0] == "--ssl",
            "{cipher:?}"
        );
    }
}

#[test]
fn compressed_protocol_with_large_packets() {
    // zlib on the client side, in both directions, across packets of more
    // than 16 MiB and statements whose frames arrive in pieces.
    let p = Setup::default().start();
    let q = "SELECT LENGTH(x), MD5(x) FROM (SELECT REPEAT(CONCAT(SEQ, 'abc'), 2000000) AS x \
             FROM seq_1_to_1) t; SELECT COUNT(*) FROM seq_1_to_100000";
    let run = |port: u16| {
        assert_ok(
            &cli(
                port,
                "app",
                "apppass",
                &[
                    "-N",
                    "-B",
                    "-Dsextant_test",
                    "--compress",
                    "--max-allowed-packet=64M",
                    "-e",
                    q,
                ],
                None,
            ),
            "compressed",
        )
    };
    let want = run(lab().primary);
    assert!(want.starts_with("8000000\t"), "{want}");
    assert_eq!(run(p.port), want);
    // A 20 MB statement sent compressed (two frames of a packet over 16 MiB).
    let big = format!("SELECT LENGTH('{}') AS n", "z".repeat(20_000_000));
    let out = cli(
        p.port,
        "app",
        "apppass",
        &["-N", "-B", "--compress", "--max-allowed-packet=64M"],
        Some(&big),
    );
    assert_eq!(assert_ok(&out, "big compressed statement"), "20000000\n");
}
