//! What a client session holds of the servers: nothing, one lent
//! connection, or (for a statement spread over shards) one per shard.
//! A lent connection goes back to its pool when its [`Lease`] is dropped,
//! so no path can forget to return it; one whose state is unknown is
//! closed with [`Lease::discard`] instead.

use crate::pool::Server;
use crate::BackendConn;
use std::sync::Arc;

/// A server connection lent by its server's pool.
pub struct Lease {
    pub server: Arc<Server>,
    /// Always Some until the lease is dropped or discarded (both consume
    /// it); an Option only so that Drop can hand the connection back.
    conn: Option<BackendConn>,
}

impl Lease {
    pub fn new(server: Arc<Server>, conn: BackendConn) -> Lease {
        Lease {
            server,
            conn: Some(conn),
        }
    }

    #[inline]
    pub fn conn(&self) -> &BackendConn {
        self.conn.as_ref().expect("a lease holds its connection")
    }

    #[inline]
    pub fn conn_mut(&mut self) -> &mut BackendConn {
        self.conn.as_mut().expect("a lease holds its connection")
    }

    /// The server and the connection at once (borrowed apart).
    #[inline]
    pub fn parts(&mut self) -> (&Arc<Server>, &mut BackendConn) {
        (
            &self.server,
            self.conn.as_mut().expect("a lease holds its connection"),
        )
    }

    /// Takes the connection out (the lease then returns nothing), for a
    /// caller that hands it back to the pool another way.
    pub fn into_conn(mut self) -> Option<BackendConn> {
        self.conn.take()
    }

    /// Closes the connection instead of returning it to the pool: its
    /// state is unknown or unwanted.
    pub fn discard(mut self) {
        if let Some(c) = self.conn.take() {
            self.server.discard(c);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // The pool itself closes a connection left in a transaction or
        // with state it cannot replay.
        if let Some(c) = self.conn.take() {
            self.server.release(c);
        }
    }
}

/// A session's server connections.
// The lease is inline on purpose: boxing it would allocate each time a
// session borrows a connection, and each session has one Binding.
#[allow(clippy::large_enum_variant)]
#[derive(Default)]
pub enum Binding {
    /// None: the next statement borrows one.
    #[default]
    Unbound,
    /// One connection, for a statement, a transaction, or pinned state.
    Direct(Lease),
    /// One connection per shard a statement or transaction spans, in the
    /// order of the plan's shards (built by the sharding executor).
    Shards(Vec<Lease>),
}

impl Binding {
    /// The one connection, if the session holds exactly one.
    #[inline]
    pub fn direct(&self) -> Option<&Lease> {
        match self {
            Binding::Direct(l) => Some(l),
            _ => None,
        }
    }

    #[inline]
    pub fn direct_mut(&mut self) -> Option<&mut Lease> {
        match self {
            Binding::Direct(l) => Some(l),
            _ => None,
        }
    }

    #[inline]
    pub fn is_bound(&self) -> bool {
        !matches!(self, Binding::Unbound)
    }

    /// Every held connection, returned to its pool (dropping the leases).
    #[inline]
    pub fn release(&mut self) {
        *self = Binding::Unbound;
    }

    /// Every held connection, closed.
    pub fn discard(&mut self) {
        match std::mem::take(self) {
            Binding::Unbound => {}
            Binding::Direct(l) => l.discard(),
            Binding::Shards(v) => v.into_iter().for_each(Lease::discard),
        }
    }

    /// Whether any held connection is inside a transaction.
    pub fn in_transaction(&self) -> bool {
        self.leases().any(|l| l.conn().in_transaction())
    }

    /// Whether any held connection carries state sextant cannot replay.
    pub fn opaque(&self) -> bool {
        self.leases().any(|l| l.conn().track.opaque)
    }

    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        let (one, many): (Option<&Lease>, &[Lease]) = match self {
            Binding::Unbound => (None, &[]),
            Binding::Direct(l) => (Some(l), &[]),
            Binding::Shards(v) => (None, v),
        };
        one.into_iter().chain(many.iter())
    }
}
