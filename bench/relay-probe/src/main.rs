//! A byte relay in two I/O styles, to measure what io_uring saves on the
//! per-statement kernel cost before building it into sextant.
//!
//! Both styles do the same work: N threads, each with its own listener on
//! the same port (SO_REUSEPORT), one server connection per client, bytes
//! relayed both ways through a 16 KiB buffer per direction. They differ
//! only in how they talk to the kernel:
//!
//! - `epoll`: a tokio current-thread runtime per thread, as sextant runs
//!   (readiness from epoll, then one recv and one send call per relay).
//! - `uring`: one io_uring per thread. Every recv and send is a submission;
//!   all the submissions a loop turn produced, across every connection of
//!   the thread, go to the kernel in one `io_uring_enter`, which also waits
//!   for the next completions (single issuer, deferred task work).
//!
//! Usage: relay-probe epoll|uring THREADS LISTEN=HOST:PORT[,HOST:PORT..] ..
//! Server addresses are taken round-robin per client connection.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const BUF: usize = 16 * 1024;

struct Route {
    port: u16,
    servers: Vec<SocketAddr>,
    next: AtomicUsize,
}

impl Route {
    fn pick(&self) -> SocketAddr {
        self.servers[self.next.fetch_add(1, Ordering::Relaxed) % self.servers.len()]
    }
}

fn parse(args: &[String]) -> Result<Vec<Arc<Route>>, String> {
    args.iter()
        .map(|a| {
            let (port, to) = a
                .split_once('=')
                .ok_or(format!("{a}: want PORT=HOST:PORT,.."))?;
            let port = port.parse().map_err(|e| format!("{port}: {e}"))?;
            let servers = to
                .split(',')
                .map(|s| s.parse().map_err(|e| format!("{s}: {e}")))
                .collect::<Result<Vec<SocketAddr>, String>>()?;
            Ok(Arc::new(Route {
                port,
                servers,
                next: AtomicUsize::new(0),
            }))
        })
        .collect()
}

fn listener(port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    s.listen(4096)?;
    Ok(s.into())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: relay-probe epoll|uring THREADS PORT=HOST:PORT[,..] ..");
        std::process::exit(2);
    }
    let threads: usize = match args[2].parse() {
        Ok(n) if n > 0 => n,
        _ => {
            eprintln!("THREADS: want a positive number");
            std::process::exit(2);
        }
    };
    let routes = match parse(&args[3..]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mode = args[1].clone();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let routes = routes.clone();
            let mode = mode.clone();
            std::thread::spawn(move || {
                let listeners: Vec<_> = routes
                    .iter()
                    .map(|r| {
                        listener(r.port).unwrap_or_else(|e| panic!("listen on {}: {e}", r.port))
                    })
                    .collect();
                match mode.as_str() {
                    "epoll" => epoll::run(listeners, routes),
                    "uring" => uring::run(listeners, routes),
                    m => panic!("mode {m}: want epoll or uring"),
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

mod epoll {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub fn run(listeners: Vec<TcpListener>, routes: Vec<Arc<Route>>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            for (l, route) in listeners.into_iter().zip(routes) {
                l.set_nonblocking(true).expect("nonblocking");
                let l = tokio::net::TcpListener::from_std(l).expect("listener");
                tokio::task::spawn_local(async move {
                    while let Ok((client, _)) = l.accept().await {
                        let to = route.pick();
                        tokio::task::spawn_local(async move {
                            let Ok(server) = tokio::net::TcpStream::connect(to).await else {
                                return;
                            };
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            let (cr, cw) = client.into_split();
                            let (sr, sw) = server.into_split();
                            let up = tokio::task::spawn_local(pump(cr, sw));
                            pump(sr, cw).await;
                            up.abort();
                        });
                    }
                });
            }
            std::future::pending::<()>().await;
        });
    }

    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
    ) {
        let mut buf = vec![0u8; BUF];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

mod uring {
    use super::*;
    use io_uring::{opcode, squeue, types, IoUring};

    // user_data: slot << 3 | op.
    const ACCEPT: u64 = 0;
    const RECV_CLIENT: u64 = 1;
    const RECV_SERVER: u64 = 2;
    const SEND_SERVER: u64 = 3;
    const SEND_CLIENT: u64 = 4;

    struct Conn {
        client: RawFd,
        server: RawFd,
        // [0]: client to server, [1]: server to client.
        bufs: [Box<[u8; BUF]>; 2],
        // Bytes received and already sent, per direction.
        len: [usize; 2],
        sent: [usize; 2],
        // Operations in flight; the slot is freed when the connection
        // is closed and nothing is in flight any more.
        inflight: u32,
        closed: bool,
    }

    struct Ring {
        ring: IoUring,
    }

    impl Ring {
        fn push(&mut self, e: squeue::Entry) {
            loop {
                // SAFETY: every buffer and fd named by an entry stays alive
                // until its completion is reaped (slots are not reused while
                // operations are in flight).
                if unsafe { self.ring.submission().push(&e) }.is_ok() {
                    return;
                }
                let _ = self.ring.submit();
            }
        }
    }

    pub fn run(listeners: Vec<TcpListener>, routes: Vec<Arc<Route>>) {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(4096)
            .or_else(|_| IoUring::new(4096))
            .expect("io_uring");
        let mut r = Ring { ring };
        let lfds: Vec<RawFd> = listeners.iter().map(|l| l.as_raw_fd()).collect();
        for (i, fd) in lfds.iter().enumerate() {
            r.push(
                opcode::Accept::new(types::Fd(*fd), std::ptr::null_mut(), std::ptr::null_mut())
                    .build()
                    .user_data((i as u64) << 3 | ACCEPT),
            );
        }
        let mut conns: Vec<Option<Conn>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut done: Vec<(u64, i32)> = Vec::with_capacity(1024);
        loop {
            if let Err(e) = r.ring.submit_and_wait(1) {
                if e.raw_os_error() == Some(libc_eintr()) {
                    continue;
                }
                panic!("io_uring_enter: {e}");
            }
            done.clear();
            done.extend(r.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(ud, res) in &done {
                let slot = (ud >> 3) as usize;
                match ud & 7 {
                    ACCEPT => {
                        let lfd = lfds[slot];
                        r.push(
                            opcode::Accept::new(
                                types::Fd(lfd),
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                            )
                            .build()
                            .user_data((slot as u64) << 3 | ACCEPT),
                        );
                        if res < 0 {
                            continue;
                        }
                        let client = res;
                        // Connecting happens once per client; blocking is fine here.
                        let Ok(server) = TcpStream::connect(routes[slot].pick()) else {
                            close(client);
                            continue;
                        };
                        let _ = server.set_nodelay(true);
                        set_nodelay(client);
                        let c = Conn {
                            client,
                            server: server.into_raw_fd(),
                            bufs: [Box::new([0; BUF]), Box::new([0; BUF])],
                            len: [0; 2],
                            sent: [0; 2],
                            inflight: 0,
                            closed: false,
                        };
                        let id = match free.pop() {
                            Some(id) => {
                                conns[id] = Some(c);
                                id
                            }
                            None => {
                                conns.push(Some(c));
                                conns.len() - 1
                            }
                        };
                        recv(&mut r, &mut conns, id, 0);
                        recv(&mut r, &mut conns, id, 1);
                    }
                    op => {
                        let Some(c) = conns[slot].as_mut() else {
                            continue;
                        };
                        c.inflight -= 1;
                        let dir = match op {
                            RECV_CLIENT | SEND_SERVER => 0,
                            _ => 1,
                        };
                        if c.closed || res <= 0 {
                            if !c.closed {
                                c.closed = true;
                                // Wakes the other direction's pending recv.
                                shutdown(c.client);
                                shutdown(c.server);
                            }
                            if c.inflight == 0 {
                                close(c.client);
                                close(c.server);
                                conns[slot] = None;
                                free.push(slot);
                            }
                            continue;
                        }
                        match op {
                            RECV_CLIENT | RECV_SERVER => {
                                c.len[dir] = res as usize;
                                c.sent[dir] = 0;
                                send(&mut r, &mut conns, slot, dir);
                            }
                            _ => {
                                c.sent[dir] += res as usize;
                                if c.sent[dir] < c.len[dir] {
                                    send(&mut r, &mut conns, slot, dir);
                                } else {
                                    recv(&mut r, &mut conns, slot, dir);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn recv(r: &mut Ring, conns: &mut [Option<Conn>], id: usize, dir: usize) {
        transfer(r, conns, id, dir, false);
    }

    fn send(r: &mut Ring, conns: &mut [Option<Conn>], id: usize, dir: usize) {
        transfer(r, conns, id, dir, true);
    }

    /// Direction 0 reads the client and writes the server; 1 the reverse.
    fn transfer(r: &mut Ring, conns: &mut [Option<Conn>], id: usize, dir: usize, sending: bool) {
        let Some(c) = conns[id].as_mut() else { return };
        let (from, to) = if dir == 0 {
            (c.client, c.server)
        } else {
            (c.server, c.client)
        };
        c.inflight += 1;
        let e = if sending {
            // SAFETY: sent < len <= BUF.
            let buf = unsafe { c.bufs[dir].as_ptr().add(c.sent[dir]) };
            let n = (c.len[dir] - c.sent[dir]) as u32;
            let op = if dir == 0 { SEND_SERVER } else { SEND_CLIENT };
            opcode::Send::new(types::Fd(to), buf, n)
                .build()
                .user_data((id as u64) << 3 | op)
        } else {
            let op = if dir == 0 { RECV_CLIENT } else { RECV_SERVER };
            opcode::Recv::new(types::Fd(from), c.bufs[dir].as_mut_ptr(), BUF as u32)
                .build()
                .user_data((id as u64) << 3 | op)
        };
        r.push(e);
    }

    fn libc_eintr() -> i32 {
        4
    }

    fn set_nodelay(fd: RawFd) {
        // SAFETY: borrowing an fd this loop owns, without closing it.
        let s = std::mem::ManuallyDrop::new(unsafe {
            <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd)
        });
        let _ = s.set_nodelay(true);
    }

    fn shutdown(fd: RawFd) {
        let s = std::mem::ManuallyDrop::new(unsafe {
            <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd)
        });
        let _ = s.shutdown(std::net::Shutdown::Both);
    }

    fn close(fd: RawFd) {
        // SAFETY: the fd is owned by this loop and closed once.
        drop(unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    }
}
