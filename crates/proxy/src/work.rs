//! What the accepting thread and the admin port hand a worker thread.

pub(crate) enum Work {
    Client(std::net::TcpStream, std::net::SocketAddr),
    /// Tell the thread's sessions to end (shutdown.rs).
    Shutdown,
    /// Send back the thread's query digests (digests.rs).
    Digests(tokio::sync::oneshot::Sender<Vec<sextant_admin::commands::digests::DigestRow>>),
    /// Forget the thread's query digests.
    ResetDigests,
}
