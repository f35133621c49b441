//! Connections to the other instances of the fleet, for KILLs forwarded to
//! the instance holding a session: one kept connection per peer (a client
//! sending KILL after KILL costs the peer one login, not one each), and a
//! bound on how many are forwarded a second.

use sextant_backend::{BackendConn, BackendError, ConnectParams};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Forwarded KILLs a second, from this instance to all peers together.
pub const KILLS_PER_SECOND: u32 = 200;

#[derive(Default)]
pub struct Peers {
    kept: tokio::sync::Mutex<HashMap<String, BackendConn>>,
    /// The current second's start, and the KILLs forwarded in it.
    window: parking_lot::Mutex<Option<(Instant, u32)>>,
}

impl Peers {
    /// Whether one more KILL may be forwarded now.
    pub fn admit(&self) -> bool {
        let mut w = self.window.lock();
        let now = Instant::now();
        match &mut *w {
            Some((start, n)) if now.duration_since(*start) < Duration::from_secs(1) => {
                *n += 1;
                *n <= KILLS_PER_SECOND
            }
            _ => {
                *w = Some((now, 1));
                true
            }
        }
    }

    /// Runs `sql` on the peer at `p.addr`, over its kept connection (made
    /// at first need). A kept connection the peer closed meanwhile (it
    /// restarted, its wait ran out) fails before the statement reaches
    /// it: it is replaced once.
    pub async fn exec(&self, p: &ConnectParams<'_>, sql: &str) -> Result<(), BackendError> {
        let kept = self.kept.lock().await.remove(p.addr);
        let was_kept = kept.is_some();
        let mut c = match kept {
            Some(c) => c,
            None => BackendConn::connect_peer(p).await?,
        };
        let mut r = c.exec_internal(sql).await;
        if was_kept && matches!(r, Err(BackendError::Io { .. })) {
            c = BackendConn::connect_peer(p).await?;
            r = c.exec_internal(sql).await;
        }
        if matches!(r, Ok(()) | Err(BackendError::Server { .. })) {
            self.kept.lock().await.insert(p.addr.to_string(), c);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_so_many_kills_a_second() {
        let p = Peers::default();
        let admitted = (0..KILLS_PER_SECOND + 50).filter(|_| p.admit()).count();
        assert_eq!(admitted, KILLS_PER_SECOND as usize);
        *p.window.lock() = Some((Instant::now() - Duration::from_secs(2), KILLS_PER_SECOND));
        assert!(p.admit(), "a new second");
    }
}
