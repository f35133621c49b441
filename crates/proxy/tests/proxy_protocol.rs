//! The PROXY protocol: behind a load balancer that sends it, sextant sees
//! the real client (SHOW SESSIONS, the failed-login lockout); a header is
//! taken only from the networks `[proxy] proxy_protocol_from` lists, and
//! from those it is required. The balancer here is a small relay in the
//! test that writes a v1 or v2 header, then passes bytes both ways.

mod common;
use common::*;
use mysql::prelude::Queryable;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// A relay to sextant's `port` that starts every connection with `header`.
/// Its port.
fn balancer(port: u16, header: Vec<u8>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let own = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(client) = client else { return };
            let header = header.clone();
            std::thread::spawn(move || {
                let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                if server.write_all(&header).is_err() {
                    return;
                }
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(&mut c2, &mut s2));
                let mut client = client;
                pipe(&mut server, &mut client);
            });
        }
    });
    own
}

fn pipe(from: &mut TcpStream, to: &mut TcpStream) {
    let mut buf = [0u8; 16384];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

fn v1(source: &str, port: u16) -> Vec<u8> {
    format!("PROXY TCP4 {source} 127.0.0.1 {port} 6033\r\n").into_bytes()
}

const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

fn v2_ipv6(source: std::net::Ipv6Addr, port: u16) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x21, 0x21, 0, 36]);
    h.extend_from_slice(&source.octets());
    h.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    h.extend_from_slice(&port.to_be_bytes());
    h.extend_from_slice(&6033u16.to_be_bytes());
    h
}

/// A v2 header of the balancer's own connection (a health check).
fn v2_local() -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x20, 0x00, 0, 0]);
    h
}

fn login(port: u16, user: &str, pass: &str) -> Result<mysql::Conn, mysql::Error> {
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(pass))
        .prefer_socket(false);
    mysql::Conn::new(opts)
}

fn code(r: Result<mysql::Conn, mysql::Error>) -> (u16, String) {
    match r {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
        Err(e) => (0, e.to_string()),
        Ok(_) => (0, "logged in".into()),
    }
}

/// The clients SHOW SESSIONS lists.
fn clients(p: &Proxy) -> Vec<String> {
    let rows: Vec<mysql::Row> = p.admin().query("SHOW SESSIONS").unwrap();
    rows.iter()
        .filter_map(|r| r.get::<String, _>("client"))
        .collect()
}

#[test]
fn the_client_a_balancer_names_is_the_sessions_client() {
    let p = Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.0/8\"]",
        ..Default::default()
    }
    .start();
    let a = balancer(p.port, v1("203.0.113.7", 5555));
    let six: std::net::Ipv6Addr = "2001:db8::7".parse().unwrap();
    let b = balancer(p.port, v2_ipv6(six, 4242));
    let check = balancer(p.port, v2_local());
    let mut ca = login(a, "app", "apppass").expect("login through a v1 balancer");
    let mut cb = login(b, "app", "apppass").expect("login through a v2 balancer");
    let mut cc = login(check, "app", "apppass").expect("login on a LOCAL connection");
    for c in [&mut ca, &mut cb, &mut cc] {
        let one: Option<i64> = c.query_first("SELECT 1").unwrap();
        assert_eq!(one, Some(1));
    }
    let listed = clients(&p);
    assert!(listed.iter().any(|c| c == "203.0.113.7:5555"), "{listed:?}");
    assert!(
        listed.iter().any(|c| c == "[2001:db8::7]:4242"),
        "{listed:?}"
    );
    // LOCAL: the balancer's own connection keeps its address.
    assert!(
        listed.iter().any(|c| c.starts_with("127.0.0.1:")),
        "{listed:?}"
    );
}

/// Failed logins lock out the client the header names, not the balancer
/// every client comes through.
#[test]
fn the_lockout_keys_on_the_client_behind_the_balancer() {
    let p = Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.1\"]\nmax_failed_logins = 3\nfailed_login_lockout_ms = 60000",
        ..Default::default()
    }
    .start();
    let bad = balancer(p.port, v1("198.51.100.9", 40000));
    let good = balancer(p.port, v1("198.51.100.10", 40001));
    for _ in 0..3 {
        assert_eq!(code(login(bad, "app", "wrong")).0, 1045);
    }
    assert_eq!(
        code(login(bad, "app", "apppass")).0,
        1129,
        "the right password from the locked-out client"
    );
    login(good, "app", "apppass").expect("another client through the same balancer");
}

/// A header from a network the setting does not list is refused, with a
/// message that says so; a connection from a listed network without one
/// is refused once the handshake time is up.
#[test]
fn headers_are_taken_only_from_listed_networks_and_required_there() {
    let elsewhere = Setup {
        proxy: "proxy_protocol_from = [\"10.0.0.0/8\"]",
        ..Default::default()
    }
    .start();
    let relay = balancer(elsewhere.port, v1("203.0.113.8", 1234));
    let (errno, msg) = code(login(relay, "app", "apppass"));
    assert!(
        msg.contains("PROXY protocol header from 127.0.0.1"),
        "{errno}: {msg}"
    );
    login(elsewhere.port, "app", "apppass").expect("a direct client is served as usual");

    let listed = Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.0/8\"]\nhandshake_timeout_ms = 1000",
        ..Default::default()
    }
    .start();
    let started = std::time::Instant::now();
    let (errno, msg) = code(login(listed.port, "app", "apppass"));
    assert!(msg.contains("no PROXY protocol header"), "{errno}: {msg}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "refused after {:?}",
        started.elapsed()
    );
    // A header that is not one: refused at once.
    let garbage = balancer(
        listed.port,
        b"PROXY TCP4 999.1.1.1 1.1.1.1 1 2\r\n".to_vec(),
    );
    let (errno, msg) = code(login(garbage, "app", "apppass"));
    assert!(
        msg.contains("malformed PROXY protocol header"),
        "{errno}: {msg}"
    );
}

/// HAProxy started from `examples/fleet/haproxy.cfg` (its addresses
/// replaced by the test's): a client logs in through it, and sextant sees
/// the client's own address and port, not HAProxy's.
#[test]
fn haproxy_from_the_example_config_passes_the_client_on() {
    let p = Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.1\"]",
        http: true,
        ..Default::default()
    }
    .start();
    let haproxy = HaProxy::start(&[&p]);
    let front = haproxy.port;
    {
        let mut r = Raw::login(front, "app", "apppass", None);
        let own = r.s.local_addr().unwrap();
        r.query("SELECT 1");
        let res = r.read_response();
        assert_ne!(res[0][0], 0xff, "{}", String::from_utf8_lossy(&res[0]));
        let listed = clients(&p);
        assert!(
            listed.iter().any(|c| *c == own.to_string()),
            "sextant does not list the client {own}: {listed:?}"
        );
    }
    drop(haproxy);
}

/// CPU time (user + system, in clock ticks) of process `pid` so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Connections from a balancer that send half a v1 line and stop: sextant
/// waits for the rest without polling (before, it looked again every 2 ms
/// until the handshake timeout), and they take places in max_connections
/// while they wait, as every connection in its handshake does.
#[test]
fn half_a_header_is_waited_for_without_polling_and_counts_as_a_connection() {
    let p = Setup {
        proxy: "proxy_protocol_from = [\"127.0.0.1\"]\nmax_connections = 150\nhandshake_timeout_ms = 8000",
        ..Default::default()
    }
    .start();
    let mut half = Vec::new();
    for _ in 0..150 {
        let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        s.write_all(b"PROXY TCP4 203.0.113.9 127.0.0.1 ").unwrap();
        half.push(s);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ticks = cpu_ticks(p.pid());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let spent = cpu_ticks(p.pid()) - ticks;
    // 2 s at 100 ticks a second: polling 150 connections every 2 ms took
    // tens of ticks; waiting takes next to none.
    assert!(spent <= 10, "{spent} ticks of CPU in 2 s");
    // Every place is taken: a whole client is refused with 1040.
    let full = balancer(p.port, v1("203.0.113.10", 6000));
    let (errno, message) = code(login(full, "app", "apppass"));
    assert_eq!(errno, 1040, "{message}; sextant's log:\n{}", p.logs());
    // The rest of a line that arrives is read, and the client served.
    drop(half.split_off(1));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut s = half.pop().unwrap();
    s.write_all(b"127.0.0.1 5000 6033\r\n").unwrap();
    let mut greeting = [0u8; 4];
    s.read_exact(&mut greeting).unwrap();
    assert!(u32::from_le_bytes([greeting[0], greeting[1], greeting[2], 0]) > 10);
    let mut c = login(full, "app", "apppass").expect("a place is free again");
    assert_eq!(c.query_first::<i64, _>("SELECT 2").unwrap(), Some(2));
}
