//! What the scripted MySQL 8 simulators share: reading a packet, and a
//! login that accepts any account, as a MySQL 8.0.36 server would greet.

use sextant_backend::PoolSettings;
use sextant_protocol::codec::{parse_header, write_packet};
use sextant_protocol::handshake::InitialHandshake;
use sextant_protocol::packets::write_simple_ok;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub async fn read_packet(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.ok()?;
    let h = parse_header(&h)?;
    let mut p = vec![0; h.len];
    s.read_exact(&mut p).await.ok()?;
    Some(p)
}

/// Greets as MySQL 8.0.36 (everything but SSL), takes any login, and
/// answers it with OK. None: the client went away.
pub async fn login(s: &mut TcpStream, connection_id: u32) -> Option<()> {
    let hs = InitialHandshake {
        server_version: "8.0.36-simulator".into(),
        connection_id,
        nonce: b"abcdefghij0123456789".to_vec(),
        capabilities: 0xdfff_ffff & !(1 << 11),
        charset: 255,
        status: 2,
        auth_plugin: "mysql_native_password".into(),
        mariadb_caps: 0,
    };
    let mut out = Vec::new();
    let mut g = Vec::new();
    hs.encode(&mut g);
    write_packet(&mut out, 0, &g);
    s.write_all(&out).await.ok()?;
    read_packet(s).await?;
    out.clear();
    write_simple_ok(&mut out, 2, 2);
    s.write_all(&out).await.ok()
}

/// A small pool for the simulated servers, connecting within
/// `connect_timeout`.
pub fn pool_settings(connect_timeout: Duration) -> PoolSettings {
    PoolSettings {
        max: 4,
        min: 0,
        connect_timeout,
        idle_timeout: Duration::from_secs(60),
        max_lifetime: Duration::from_secs(600),
        health_check_idle: Duration::from_secs(1),
        wait: Duration::from_secs(1),
        max_prepared: 16,
        pipeline_depth: 0,
        pipeline_connections: 0,
        query_timeout: None,
        tls: None,
        server_key: None,
    }
}
