//! A session's turn on a pipe: where the session waits for the pipe's
//! connection, and where the session ahead of it in line hands it over.
//!
//! A channel per read would cost a heap allocation per pipelined
//! statement. A session has at most one read in flight, so it keeps one
//! [`TurnSlot`] for its whole life and the pipe's line holds a second
//! reference to it (a count, not an allocation) while the read waits.

use crate::conn::BackendConn;
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The connection, handed to the session whose answer comes next. Boxed
/// once, when the pipe opens: handing it on then moves a pointer, not the
/// connection (its buffers and state, several hundred bytes copied at each
/// send, receive and pass: 2-3% of sextant's instructions on pipelined
/// reads).
pub type Baton = Box<BackendConn>;

/// The place one session waits for its turns, one after another.
#[derive(Default)]
pub struct TurnSlot(Arc<Mutex<Slot>>);

#[derive(Default)]
struct Slot {
    baton: Option<Baton>,
    waker: Option<Waker>,
    state: State,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nobody waits here (no turn, or the waiting session gave up): a
    /// connection handed over is refused.
    #[default]
    Idle,
    Waiting,
    /// The pipe failed before this turn came.
    Lost,
}

/// The pipe failed before the turn came: nothing will be handed over.
#[derive(Debug, PartialEq, Eq)]
pub struct TurnLost;

impl TurnSlot {
    /// A turn waiting in this slot, and the pipe's end of it. The slot is
    /// used again when nothing holds it any more (the usual case: the
    /// session's previous turn is over); if something still does, this
    /// turn waits in a slot of its own.
    pub(crate) fn wait(&self) -> (Turn, Handover) {
        let slot = if Arc::strong_count(&self.0) == 1 {
            self.0.clone()
        } else {
            Arc::default()
        };
        {
            let mut s = slot.lock();
            s.baton = None;
            s.waker = None;
            s.state = State::Waiting;
        }
        (Turn(slot.clone()), Handover(slot))
    }
}

/// The pipe's end of a turn: hands the connection over. Dropped without
/// handing it (the pipe failed), the turn ends without it.
pub(crate) struct Handover(Arc<Mutex<Slot>>);

impl Handover {
    /// Gives the connection to the waiting session; back if it no longer
    /// waits (its turn was dropped).
    pub(crate) fn give(self, baton: Baton) -> Result<(), Baton> {
        let waker = {
            let mut s = self.0.lock();
            if s.state != State::Waiting {
                return Err(baton);
            }
            s.baton = Some(baton);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl Drop for Handover {
    /// A turn nobody will hand the connection to (the pipe failed, or was
    /// dropped with sessions in line) must end, not wait for ever.
    fn drop(&mut self) {
        let waker = {
            let mut s = self.0.lock();
            if s.state != State::Waiting || s.baton.is_some() {
                return;
            }
            s.state = State::Lost;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A session's wait for the connection: resolves to it when the answers
/// ahead are relayed, or to [`TurnLost`] if the pipe fails first. Dropped
/// unfinished, the session leaves the line; a connection handed to it
/// meanwhile is dropped (closed) with it.
pub struct Turn(Arc<Mutex<Slot>>);

impl Future for Turn {
    type Output = Result<Baton, TurnLost>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.lock();
        if let Some(b) = s.baton.take() {
            s.state = State::Idle;
            return Poll::Ready(Ok(b));
        }
        match s.state {
            State::Lost => {
                s.state = State::Idle;
                Poll::Ready(Err(TurnLost))
            }
            _ => {
                match &mut s.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let baton = {
            let mut s = self.0.lock();
            s.state = State::Idle;
            s.waker = None;
            s.baton.take()
        };
        drop(baton);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn baton() -> (Baton, std::net::TcpListener) {
        let (conn, l) = BackendConn::to_silent_server().await;
        (Box::new(conn), l)
    }

    #[tokio::test]
    async fn a_turn_gets_what_is_handed_over_and_the_slot_serves_again() {
        let slot = TurnSlot::default();
        let (mut b, _l) = baton().await;
        for round in 0..3 {
            let (turn, handover) = slot.wait();
            // Nothing else holds the slot once a turn is over.
            assert!(
                Arc::ptr_eq(&turn.0, &slot.0),
                "round {round}: the slot is used again"
            );
            let waiting = tokio::spawn(turn);
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished(), "nothing was handed over yet");
            assert!(handover.give(b).is_ok(), "the session waits");
            b = waiting.await.unwrap().expect("the connection");
        }
    }

    #[tokio::test]
    async fn a_lost_pipe_ends_the_turn_without_the_connection() {
        let slot = TurnSlot::default();
        let (turn, handover) = slot.wait();
        drop(handover);
        assert_eq!(turn.await.err(), Some(TurnLost));
        // A line dropped whole (the pipe with it) ends its turns too.
        let (turn, handover) = slot.wait();
        let waiting = tokio::spawn(turn);
        tokio::task::yield_now().await;
        drop(vec![handover]);
        assert_eq!(waiting.await.unwrap().err(), Some(TurnLost));
    }

    #[tokio::test]
    async fn a_turn_given_up_refuses_the_connection() {
        let slot = TurnSlot::default();
        let (b, _l) = baton().await;
        let (turn, handover) = slot.wait();
        drop(turn);
        assert!(
            handover.give(b).is_err(),
            "the connection comes back when nobody waits"
        );
    }

    #[tokio::test]
    async fn a_slot_still_held_is_not_reused() {
        let slot = TurnSlot::default();
        let (first, _h1) = slot.wait();
        let (second, h2) = slot.wait();
        assert!(
            !Arc::ptr_eq(&first.0, &second.0),
            "a second turn while the first is in line gets a slot of its own"
        );
        drop(h2);
        assert!(second.await.is_err());
        drop(first);
    }
}
