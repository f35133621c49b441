//! Sends of one worker thread gathered per loop turn and handed to the
//! kernel in one `io_uring_enter`, instead of one `send` call each.
//!
//! A send on a thread with batching installed parks its bytes here and
//! yields; other sessions of the thread run and park theirs; when the
//! thread's runtime has nothing left to run (its before-park hook), or the
//! batch is full, [`flush`] submits them all at once. Every send carries
//! MSG_DONTWAIT, which io_uring honours by completing it during the submit
//! call, written or with EAGAIN, instead of arming a poll and finishing
//! later: so no buffer is ever in the kernel's hands after `flush` returns,
//! and a send future can be dropped at any await point. What a batched send
//! could not write (a full socket buffer) the caller writes the usual way.
//!
//! Receives stay with tokio's epoll reactor: this only takes the sends,
//! two per proxied statement, out of the syscall count.

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Submission queue size; a turn with more sends flushes early.
const ENTRIES: u32 = 256;

struct Slot {
    fd: RawFd,
    ptr: *const u8,
    len: u32,
    /// The kernel's answer: bytes written or -errno.
    result: Option<i32>,
    waker: Option<Waker>,
    /// Still wanted: a dropped send's slot stays queued but is skipped.
    live: bool,
}

struct Batch {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    queued: Vec<usize>,
    wake: Vec<Waker>,
    /// Sends submitted, the submit calls that carried them, and the sends
    /// that came back short (left to the usual way).
    sent: u64,
    calls: u64,
    short: u64,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// Turns batching on for sends made on this thread. Errors when the kernel
/// has no io_uring (or refuses it): sends then go the usual way.
pub fn install() -> io::Result<()> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(ENTRIES)
        .or_else(|_| IoUring::new(ENTRIES))?;
    BATCH.with(|b| {
        *b.borrow_mut() = Some(Batch {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            queued: Vec::with_capacity(ENTRIES as usize),
            wake: Vec::with_capacity(ENTRIES as usize),
            sent: 0,
            calls: 0,
            short: 0,
        })
    });
    Ok(())
}

/// Whether sends on this thread are batched.
pub fn installed() -> bool {
    BATCH.with(|b| b.borrow().is_some())
}

/// Sends this thread's batches carried, the io_uring calls they took, and
/// how many of them the kernel took only in part.
pub fn counts() -> (u64, u64, u64) {
    BATCH.with(|b| {
        b.borrow()
            .as_ref()
            .map_or((0, 0, 0), |b| (b.sent, b.calls, b.short))
    })
}

/// Submits every parked send and wakes their tasks. Called by the
/// runtime before it parks the thread; cheap when nothing is parked.
pub fn flush() {
    let wake = BATCH.with(|b| {
        let mut b = b.borrow_mut();
        let Some(batch) = b.as_mut() else {
            return Vec::new();
        };
        batch.submit();
        std::mem::take(&mut batch.wake)
    });
    // Woken outside the borrow: a waker may poll nothing here, but keep
    // the thread-local free for whatever it does.
    for w in wake {
        w.wake();
    }
}

impl Batch {
    fn submit(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let mut n = 0;
        {
            let mut sq = self.ring.submission();
            for &id in &self.queued {
                let s = &self.slots[id];
                if !s.live {
                    continue;
                }
                let e = opcode::Send::new(types::Fd(s.fd), s.ptr, s.len)
                    .flags(libc_flags())
                    .build()
                    .user_data(id as u64);
                // SAFETY: the bytes belong to a send future that is
                // pending (live) and stays so until this call has reaped
                // the completion: MSG_DONTWAIT makes each send complete
                // during the submit, and we wait for all of them below.
                // The queue has room: at most ENTRIES are queued.
                if unsafe { sq.push(&e) }.is_ok() {
                    n += 1;
                }
            }
        }
        let mut reaped = 0;
        let mut failed = false;
        self.sent += n as u64;
        while reaped < n {
            self.calls += 1;
            if let Err(e) = self.ring.submit_and_wait(n - reaped) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                failed = true;
            }
            for c in self.ring.completion() {
                reaped += 1;
                if let Some(s) = self.slots.get_mut(c.user_data() as usize) {
                    if c.result() < s.len as i32 {
                        self.short += 1;
                    }
                    s.result = Some(c.result());
                }
            }
            if failed {
                break;
            }
        }
        for &id in &self.queued {
            let s = &mut self.slots[id];
            if !s.live {
                self.free.push(id);
                continue;
            }
            // A ring that failed leaves the send to the usual way.
            if s.result.is_none() {
                s.result = Some(-11);
            }
            if let Some(w) = s.waker.take() {
                self.wake.push(w);
            }
        }
        self.queued.clear();
    }
}

fn libc_flags() -> i32 {
    // MSG_DONTWAIT | MSG_NOSIGNAL on Linux.
    0x40 | 0x4000
}

/// Sends what it can of `bytes` on `fd` in this thread's next batch: the
/// bytes written (maybe fewer than asked), or WouldBlock when the socket
/// buffer is full. None when batching is not installed on this thread.
pub fn send(fd: RawFd, bytes: &[u8]) -> Option<BatchedSend<'_>> {
    if bytes.is_empty() || !installed() {
        return None;
    }
    Some(BatchedSend {
        fd,
        bytes,
        slot: None,
    })
}

pub struct BatchedSend<'a> {
    fd: RawFd,
    bytes: &'a [u8],
    slot: Option<usize>,
}

impl Future for BatchedSend<'_> {
    type Output = io::Result<usize>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        BATCH.with(|b| {
            let mut b = b.borrow_mut();
            let Some(batch) = b.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::WouldBlock.into()));
            };
            match this.slot {
                None => {
                    if batch.queued.len() >= ENTRIES as usize {
                        batch.submit();
                        let wake = std::mem::take(&mut batch.wake);
                        for w in wake {
                            w.wake();
                        }
                    }
                    let slot = Slot {
                        fd: this.fd,
                        ptr: this.bytes.as_ptr(),
                        len: this.bytes.len().min(u32::MAX as usize) as u32,
                        result: None,
                        waker: Some(cx.waker().clone()),
                        live: true,
                    };
                    let id = match batch.free.pop() {
                        Some(id) => {
                            batch.slots[id] = slot;
                            id
                        }
                        None => {
                            batch.slots.push(slot);
                            batch.slots.len() - 1
                        }
                    };
                    batch.queued.push(id);
                    this.slot = Some(id);
                    Poll::Pending
                }
                Some(id) => {
                    let s = &mut batch.slots[id];
                    match s.result {
                        Some(r) => {
                            this.slot = None;
                            batch.free.push(id);
                            Poll::Ready(if r >= 0 {
                                Ok(r as usize)
                            } else {
                                Err(io::Error::from_raw_os_error(-r))
                            })
                        }
                        None => {
                            s.waker = Some(cx.waker().clone());
                            Poll::Pending
                        }
                    }
                }
            }
        })
    }
}

impl Drop for BatchedSend<'_> {
    fn drop(&mut self) {
        let Some(id) = self.slot.take() else { return };
        let _ = BATCH.try_with(|b| {
            if let Ok(mut b) = b.try_borrow_mut() {
                if let Some(batch) = b.as_mut() {
                    let s = &mut batch.slots[id];
                    if s.result.is_some() {
                        // Reaped already: the slot is ours to free.
                        batch.free.push(id);
                    } else {
                        // Still queued: the next flush skips and frees it.
                        s.live = false;
                        s.waker = None;
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stream;
    use tokio::io::AsyncReadExt;

    /// A current-thread runtime that flushes before it parks, as sextant's
    /// worker threads run with `batch_sends`.
    fn runtime() -> tokio::runtime::Runtime {
        install().expect("io_uring on this kernel");
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(flush)
            .build()
            .expect("runtime")
    }

    async fn pair() -> (Stream, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        // A small send buffer, so that the larger messages come back short
        // from the batch and take the usual way for the rest.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_send_buffer_size(64 << 10).expect("SO_SNDBUF");
        let (a, b) = tokio::join!(socket.connect(addr), l.accept());
        (Stream::Plain(a.expect("connect")), b.expect("accept").0)
    }

    fn message(conn: usize, i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|k| (conn * 31 + i * 7 + k) as u8).collect()
    }

    #[test]
    fn sends_of_many_sessions_share_calls_and_arrive_whole_and_in_order() {
        let rt = runtime();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for conn in 0..32 {
                let (mut tx, mut rx) = pair().await;
                tasks.push(tokio::spawn(async move {
                    let reader = tokio::spawn(async move {
                        let mut got = Vec::new();
                        rx.read_to_end(&mut got).await.expect("read");
                        got
                    });
                    let mut want = Vec::new();
                    for i in 0..200 {
                        // Mostly small, as statements and short answers;
                        // now and then larger than a socket buffer takes at
                        // once, so a batched send comes back short.
                        let len = if i % 50 == 7 {
                            1 << 20
                        } else {
                            1 + (i * 37) % 3000
                        };
                        let m = message(conn, i, len);
                        tx.send(&m).await.expect("send");
                        want.extend_from_slice(&m);
                    }
                    drop(tx);
                    assert!(
                        reader.await.expect("reader") == want,
                        "connection {conn}: bytes lost or reordered"
                    );
                }));
            }
            for t in tasks {
                t.await.expect("session");
            }
        });
        let (sent, calls, short) = counts();
        assert!(sent >= 32 * 200, "sends went around the batch: {sent}");
        assert!(
            short > 0,
            "no send filled a socket buffer: the usual way was not tried"
        );
        assert!(
            calls * 2 < sent,
            "{sent} sends took {calls} calls: not batched"
        );
    }

    #[test]
    fn a_send_dropped_before_its_batch_goes_out_is_not_sent() {
        let rt = runtime();
        rt.block_on(async {
            let (mut tx, mut rx) = pair().await;
            let gone = b"never";
            {
                let Some(mut f) = send(tx.raw_fd().expect("fd"), gone) else {
                    panic!("batching is installed");
                };
                // Parked in the batch, then dropped before any flush.
                let waker = futures_noop_waker();
                let mut cx = Context::from_waker(&waker);
                assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
            }
            tx.send(b"kept").await.expect("send");
            drop(tx);
            let mut got = Vec::new();
            rx.read_to_end(&mut got).await.expect("read");
            assert_eq!(got, b"kept");
        });
    }

    fn futures_noop_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        Waker::from(std::sync::Arc::new(Noop))
    }
}
