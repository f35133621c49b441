//! The client side of a session: reading packets (with a size limit, before
//! buffering) and writing what goes back.

use crate::errors::SessionError;
use sextant_net::Stream;
use sextant_protocol::codec::{parse_header, HEADER_LEN, MAX_PAYLOAD};
use sextant_protocol::compress::{Algorithm, Compression};
use sextant_protocol::packets::write_err;
use sextant_protocol::ProtoError;
use std::net::SocketAddr;
use tokio::io::AsyncReadExt;

/// Largest packet a client may send before it has logged in. A login
/// packet (with its connection attributes), an auth-switch answer or an
/// RSA-encrypted password is well under this; without a bound, a header
/// announcing 16 MiB would have sextant hold 16 MiB for a client that has
/// proven nothing.
pub const PRE_AUTH_MAX_PACKET: usize = 64 << 10;

/// How long the rest of a packet that has begun may take to arrive when
/// the client set no net_read_timeout (the servers' default).
const NET_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub struct Client {
    pub stream: Stream,
    pub rbuf: Vec<u8>,
    pub out: Vec<u8>,
    pub peer: SocketAddr,
    pub max_packet: usize,
    /// The smallest max_allowed_packet of the servers, as the monitor
    /// read it (0: not known): a larger statement is refused here, as the
    /// servers would refuse it, never sent on to be dropped.
    pub servers_packet: usize,
    /// `[proxy] statement_memory_mb` in bytes: what all sessions' large
    /// statements being read may hold together.
    pub statement_memory: usize,
    /// This session's share of it.
    held: crate::memory::Held,
    /// Sequence id of the last frame read (errors during login follow it).
    pub last_seq: u8,
    /// Writes to the client so far: whether an abandoned answer had begun.
    pub sends: u64,
    /// The client's own session-tracking settings, once a server reported
    /// session state (None: the server's defaults).
    pub tracking: Option<Box<sextant_backend::Tracking>>,
    /// Settings the statement being relayed assigns (literal values), to
    /// apply before its own report is filtered.
    pub pending_tracking: Vec<(&'static str, Vec<u8>)>,
    /// Reused for rewriting what the client is sent.
    pub scratch: Vec<u8>,
    /// The net_write_timeout and net_read_timeout the client set: how long
    /// a write to it may block, and how long a LOAD DATA LOCAL may wait
    /// for its file (None: as long as the server connection allows).
    pub write_timeout: Option<std::time::Duration>,
    pub read_timeout: Option<std::time::Duration>,
    /// The compressed protocol, once the login negotiated it: bytes read
    /// and not yet decoded, and a buffer for what is sent.
    compress: Option<Box<Compressed>>,
}

struct Compressed {
    c: Compression,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Client {
    pub fn new(stream: tokio::net::TcpStream, peer: SocketAddr, max_packet: usize) -> Self {
        Client {
            stream: Stream::Plain(stream),
            // Small to start: most sessions are idle most of the time, and
            // buffers grow when a statement needs it.
            rbuf: Vec::with_capacity(2048),
            out: Vec::new(),
            peer,
            max_packet,
            statement_memory: usize::MAX,
            held: crate::memory::Held::default(),
            last_seq: 0,
            servers_packet: 0,
            sends: 0,
            tracking: None,
            write_timeout: None,
            read_timeout: None,
            pending_tracking: Vec::new(),
            scratch: Vec::new(),
            compress: None,
        }
    }

    /// Gives back read-buffer memory above `keep` when nothing is buffered;
    /// returns how much.
    pub fn shrink_idle(&mut self, keep: usize) -> usize {
        if self.rbuf.is_empty() && self.rbuf.capacity() > keep {
            let freed = self.rbuf.capacity();
            self.rbuf = Vec::with_capacity(2048);
            return freed;
        }
        0
    }

    /// Reads more of what the client sends: at least one byte more in
    /// `rbuf`. Cancel-safe: what was read stays buffered.
    pub async fn fill(&mut self) -> Result<(), SessionError> {
        let want = self.rbuf.len() + 1;
        self.fill_to(want).await
    }

    /// Whether part of a packet (or of a compressed frame) has arrived and
    /// the rest has not: the client is in the middle of sending.
    fn mid_packet(&self) -> bool {
        !self.rbuf.is_empty()
            || self
                .compress
                .as_ref()
                .is_some_and(|z| !z.input.is_empty() || z.c.in_frame())
    }

    /// Reads until `rbuf` has grown, decoding compressed frames only as far
    /// as `want` bytes (so a small compressed frame announcing a huge
    /// statement is not inflated before the statement's size is checked).
    async fn fill_to(&mut self, want: usize) -> Result<(), SessionError> {
        let before = self.rbuf.len();
        let max_frame = self.max_packet.saturating_add(HEADER_LEN);
        loop {
            if let Some(z) = &mut self.compress {
                z.c.decode(&mut z.input, &mut self.rbuf, want, max_frame)
                    .map_err(|e| match e {
                        ProtoError::FrameTooLarge { size, max } => {
                            SessionError::PacketTooLarge { size, max }
                        }
                        ProtoError::FrameOutOfOrder { expected, got } => {
                            SessionError::OutOfOrder { expected, got }
                        }
                        ProtoError::Uncompress(what) => SessionError::Uncompress(what),
                        e => SessionError::Malformed(e),
                    })?;
                if self.rbuf.len() > before {
                    return Ok(());
                }
            }
            // Once part of a packet has arrived, the rest must follow
            // within the client's net_read_timeout, as a server waits.
            let limit = self
                .mid_packet()
                .then(|| self.read_timeout.unwrap_or(NET_READ_TIMEOUT));
            let buf = match &mut self.compress {
                Some(z) => {
                    if z.input.capacity() - z.input.len() < 1024 {
                        z.input.reserve(8192);
                    }
                    &mut z.input
                }
                None => {
                    if self.rbuf.capacity() - self.rbuf.len() < 1024 {
                        // Room for what is asked for, not double: a large
                        // packet's buffer is its size (the statement
                        // memory budget counts that).
                        let more = want.saturating_sub(self.rbuf.len()).max(8192);
                        self.rbuf.reserve_exact(more);
                    }
                    &mut self.rbuf
                }
            };
            let n = match limit {
                None => self.stream.read_buf(buf).await?,
                Some(limit) => tokio::time::timeout(limit, self.stream.read_buf(buf))
                    .await
                    .map_err(|_| SessionError::ReadTimeout(limit.as_secs()))??,
            };
            if n == 0 {
                return Err(SessionError::ClientClosed);
            }
            sextant_admin::traffic::bytes_in(n);
            if self.compress.is_none() {
                return Ok(());
            }
        }
    }

    /// From now on, what is read and sent goes through the compressed
    /// protocol (after the login's final OK, as servers do).
    pub fn start_compression(&mut self, algorithm: Algorithm) {
        self.compress = Some(Box::new(Compressed {
            c: Compression::new(algorithm),
            input: Vec::new(),
            output: Vec::new(),
        }));
    }

    pub fn compression(&self) -> Option<Algorithm> {
        self.compress.as_ref().map(|z| z.c.algorithm)
    }

    /// Writes `out` to the client (compressed if so negotiated); the
    /// caller clears it.
    pub async fn send_out(&mut self) -> std::io::Result<()> {
        let out = std::mem::take(&mut self.out);
        let r = self.send_bytes(&out).await;
        self.out = out;
        r
    }

    /// Writes `bytes` to the client (compressed if so negotiated), within
    /// the client's net_write_timeout: the relay sends a server's packets
    /// from where they were read, without copying them first.
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.write_timeout {
            None => self.send_now(bytes).await,
            Some(limit) => match tokio::time::timeout(limit, self.send_now(bytes)).await {
                Ok(r) => r,
                // As the server does past net_write_timeout: the client
                // connection is given up.
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the client read nothing for {} s (its net_write_timeout)",
                        limit.as_secs()
                    ),
                )),
            },
        }
    }

    async fn send_now(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sends += 1;
        match &mut self.compress {
            None => {
                sextant_admin::traffic::bytes_out(bytes.len());
                self.stream.send(bytes).await
            }
            Some(z) => {
                z.output.clear();
                z.c.encode(bytes, &mut z.output);
                sextant_admin::traffic::bytes_out(z.output.len());
                let r = self.stream.send(&z.output).await;
                if z.output.capacity() > 64 * 1024 {
                    z.output = Vec::new();
                }
                r
            }
        }
    }

    /// Reads one logical packet into `payload` (replacing its contents) and
    /// returns the sequence id of its first frame. Frames of 16 MiB and more
    /// are joined. A packet over `max_packet` is refused as soon as its
    /// header says so, before it is buffered.
    pub async fn read_packet(&mut self, payload: &mut Vec<u8>) -> Result<u8, SessionError> {
        payload.clear();
        // The last statement is done with.
        self.held.release();
        let mut first_seq = None;
        let mut expect_seq = 0u8;
        loop {
            while self.rbuf.len() < HEADER_LEN {
                self.fill_to(HEADER_LEN).await?;
            }
            let h = parse_header(&self.rbuf).ok_or(SessionError::ClientClosed)?;
            // Under compression the frames' own sequence ids carry the
            // order; clients do not keep counting inside them.
            if first_seq.is_some() && self.compress.is_none() && h.seq != expect_seq {
                return Err(SessionError::OutOfOrder {
                    expected: expect_seq,
                    got: h.seq,
                });
            }
            let total = payload.len() + h.len;
            let max = match self.servers_packet {
                0 => self.max_packet,
                s => self.max_packet.min(s),
            };
            if total > max {
                // The client sends the rest whatever happens: read past
                // it, so that the error follows its last frame's sequence
                // id, as the server's would.
                if self.compress.is_none() {
                    self.skip_frames(h.len, h.seq).await?;
                }
                return Err(SessionError::PacketTooLarge { size: total, max });
            }
            if total > crate::memory::COUNTED_FROM {
                // Taken before the packet is read: past the budget,
                // nothing of it is buffered.
                let frame = if payload.is_empty() {
                    h.len
                } else {
                    MAX_PAYLOAD
                };
                if let Err(held) = self
                    .held
                    .grow_to(crate::memory::held_for(total, frame), self.statement_memory)
                {
                    let e = SessionError::StatementMemory {
                        size: total,
                        held_mb: held >> 20,
                        max_mb: self.statement_memory >> 20,
                    };
                    if self.compress.is_none() {
                        // Read past the rest, holding none of it: the
                        // client reads the error after its last frame and
                        // may retry on the same session.
                        *payload = Vec::new();
                        self.held.release();
                        self.skip_frames(h.len, h.seq).await?;
                    }
                    return Err(e);
                }
            }
            if self.rbuf.len() < HEADER_LEN + h.len {
                self.rbuf
                    .reserve_exact(HEADER_LEN + h.len - self.rbuf.len());
            }
            while self.rbuf.len() < HEADER_LEN + h.len {
                self.fill_to(HEADER_LEN + h.len).await?;
            }
            payload.reserve_exact(h.len);
            payload.extend_from_slice(&self.rbuf[HEADER_LEN..HEADER_LEN + h.len]);
            self.rbuf.drain(..HEADER_LEN + h.len);
            first_seq.get_or_insert(h.seq);
            self.last_seq = h.seq;
            expect_seq = h.seq.wrapping_add(1);
            if h.len < MAX_PAYLOAD {
                return Ok(first_seq.unwrap_or(0));
            }
        }
    }

    /// Discards a refused statement's frames, from the one whose header
    /// was read (`len` bytes, sequence `seq`) to its last, without holding
    /// them, within the client's read timeout; `last_seq` is the last
    /// frame's.
    async fn skip_frames(&mut self, mut len: usize, mut seq: u8) -> Result<(), SessionError> {
        self.rbuf.drain(..HEADER_LEN);
        loop {
            let mut left = len;
            while left > 0 {
                if self.rbuf.is_empty() {
                    self.fill_to(1).await?;
                }
                let n = left.min(self.rbuf.len());
                self.rbuf.drain(..n);
                left -= n;
            }
            self.last_seq = seq;
            if len < MAX_PAYLOAD {
                return Ok(());
            }
            while self.rbuf.len() < HEADER_LEN {
                let want = self.rbuf.len() + 1;
                self.fill_to(want).await?;
            }
            let h = parse_header(&self.rbuf).ok_or(SessionError::ClientClosed)?;
            self.rbuf.drain(..HEADER_LEN);
            len = h.len;
            seq = h.seq;
        }
    }

    /// Reads one packet with exact reads, consuming nothing beyond it: the
    /// first login packet may be an SSLRequest followed at once by the TLS
    /// handshake, which must stay in the socket for the TLS layer.
    pub async fn read_first_packet(&mut self, payload: &mut Vec<u8>) -> Result<u8, SessionError> {
        debug_assert!(self.rbuf.is_empty());
        let mut h = [0u8; HEADER_LEN];
        let eof = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => SessionError::ClientClosed,
            _ => SessionError::ClientIo(e),
        };
        self.stream.read_exact(&mut h).await.map_err(eof)?;
        if crate::proxy_header::looks_like_header(&h) {
            // The client's own login packet, if it sends one after the
            // header, is sequence 1: the error answers it.
            self.last_seq = 1;
            return Err(SessionError::Handshake(format!(
                "a PROXY protocol header from {}, which [proxy] proxy_protocol_from does not list",
                self.peer.ip()
            )));
        }
        let hdr = parse_header(&h).ok_or(SessionError::ClientClosed)?;
        if hdr.len >= MAX_PAYLOAD || hdr.len > self.max_packet.min(PRE_AUTH_MAX_PACKET) {
            return Err(SessionError::Handshake(format!(
                "login packet of {} bytes",
                hdr.len
            )));
        }
        payload.clear();
        payload.resize(hdr.len, 0);
        self.stream.read_exact(payload).await.map_err(eof)?;
        self.last_seq = hdr.seq;
        Ok(hdr.seq)
    }

    /// Switches to TLS after the client's SSLRequest.
    pub async fn start_tls(
        &mut self,
        config: std::sync::Arc<rustls::ServerConfig>,
    ) -> Result<(), SessionError> {
        if !self.rbuf.is_empty() {
            // Bytes after the SSLRequest before the TLS handshake: a client
            // that does not wait, or an attack on the upgrade.
            return Err(SessionError::Handshake(
                "data sent before the TLS handshake".into(),
            ));
        }
        let plain = std::mem::replace(&mut self.stream, Stream::Detached);
        self.stream = plain
            .accept_tls(config)
            .await
            .map_err(|e| SessionError::Handshake(format!("TLS handshake failed: {e}")))?;
        Ok(())
    }

    /// Reads and drops whatever the client sends for up to `d`.
    pub async fn drain_for(&mut self, d: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + d;
        // On the heap: an array here would sit in every session's future.
        let mut sink = vec![0u8; 16384];
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, self.stream.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
        self.rbuf.clear();
    }

    pub async fn flush(&mut self) -> Result<(), SessionError> {
        if !self.out.is_empty() {
            self.send_out().await?;
            self.out.clear();
        }
        Ok(())
    }

    /// Sends an error packet for `e` and flushes.
    pub async fn send_error(&mut self, seq: u8, e: &SessionError) -> Result<(), SessionError> {
        let (code, state, msg) = e.mysql();
        sextant_admin::traffic::error(code);
        write_err(&mut self.out, seq, code, state, &msg);
        self.flush().await
    }
}
