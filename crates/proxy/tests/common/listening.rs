//! Whether a given process listens on a port, read from /proc.
//!
//! A successful connect() does not say that: CI once saw a connect to a
//! port sextant had not bound yet succeed (a connection to itself when the
//! source port drawn equals the destination, or a process of an earlier
//! test still holding the port), and the test's next connect was refused.

use std::collections::HashSet;

/// Socket inodes of the TCP sockets listening on 127.0.0.1 or any address
/// at `port`, from /proc/net/tcp and tcp6.
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut out = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retr uid timeout inode
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            let Some((_, p)) = f[1].rsplit_once(':') else {
                continue;
            };
            if u16::from_str_radix(p, 16).ok() != Some(port) {
                continue;
            }
            if let Ok(inode) = f[9].parse() {
                out.insert(inode);
            }
        }
    }
    out
}

/// Whether process `pid` holds a socket listening on `port`.
pub fn listens(pid: u32, port: u16) -> bool {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|l| {
                l.to_str()
                    .and_then(|s| s.strip_prefix("socket:["))
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
            })
            .is_some_and(|i| inodes.contains(&i))
    })
}

#[test]
fn a_listener_of_this_process_is_seen_and_a_closed_one_is_not() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    assert!(listens(std::process::id(), port));
    drop(l);
    assert!(!listens(std::process::id(), port));
}
