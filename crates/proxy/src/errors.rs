//! Every error a client can see, and the one place where each becomes a
//! MySQL error number, SQLSTATE and message.

use sextant_backend::BackendError;
use sextant_protocol::ProtoError;
use sextant_routing::Refusal;
use thiserror::Error;

/// Sextant's own error numbers, in the range MySQL leaves to applications
/// and proxies (ProxySQL uses 9001 too, so tools already treat it as
/// "the proxy could not reach a server").
pub const ER_SEXTANT_NO_BACKEND: u16 = 9001;
pub const ER_SEXTANT_STATE_RESTORE: u16 = 9002;
/// The server connection died during a statement. Not 2013: that is a
/// client-side code, and client libraries that receive it from a server
/// drop their own (healthy) connection to sextant.
pub const ER_SEXTANT_BACKEND_LOST: u16 = 9003;
pub const ER_SEXTANT_NO_PRIMARY: u16 = 9004;
/// A statement sent to several groups ran on some and failed on another.
pub const ER_SEXTANT_SHARD_PARTIAL: u16 = 9005;
/// RELOAD CONFIG found the file invalid; the running config stays.
pub const ER_SEXTANT_CONFIG: u16 = 9006;
/// An admin change for the whole fleet was not made: etcd did not answer,
/// or another instance changed the same thing first.
pub const ER_SEXTANT_FLEET: u16 = 9007;
/// A planned switchover (the admin port's SWITCHOVER GROUP) was not done.
pub const ER_SEXTANT_SWITCHOVER: u16 = 9008;
/// The session's transaction (or other state held on one connection) was
/// on a primary that a failover or switchover replaced: it is gone.
/// SQLSTATE 40001, as for a deadlock: applications retry such a
/// transaction from its start.
pub const ER_SEXTANT_FAILED_OVER: u16 = 9009;
pub const ER_WRONG_VALUE_FOR_VAR: u16 = 1231;

pub const ER_CON_COUNT_ERROR: u16 = 1040;
pub const ER_SERVER_SHUTDOWN: u16 = 1053;
pub const ER_HANDSHAKE_ERROR: u16 = 1043;
pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
pub const ER_HOST_IS_BLOCKED: u16 = 1129;
pub const ER_NO_SUCH_THREAD: u16 = 1094;
pub const ER_QUERY_INTERRUPTED: u16 = 1317;
pub const ER_SP_DOES_NOT_EXIST: u16 = 1305;
pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
pub const ER_OUT_OF_SORTMEMORY: u16 = 1038;
pub const ER_KILL_DENIED_ERROR: u16 = 1095;
pub const ER_UNKNOWN_COM_ERROR: u16 = 1047;
pub const ER_NET_PACKET_TOO_LARGE: u16 = 1153;
pub const ER_NET_PACKETS_OUT_OF_ORDER: u16 = 1156;
pub const ER_NET_UNCOMPRESS_ERROR: u16 = 1157;
pub const ER_NET_READ_INTERRUPTED: u16 = 1159;
pub const ER_OUT_OF_RESOURCES: u16 = 1041;
pub const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;
pub const ER_MALFORMED_PACKET: u16 = 1835;
pub const CR_SERVER_LOST: u16 = 2013;
pub const ER_SECURE_TRANSPORT_REQUIRED: u16 = 3159;
pub const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;
pub const ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: u16 = 1792;
pub const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;
pub const ER_USER_LIMIT_REACHED: u16 = 1226;
pub const ER_CLIENT_INTERACTION_TIMEOUT: u16 = 4031;
pub const ER_XA_RBROLLBACK: u16 = 1402;
pub const ER_ERROR_DURING_COMMIT: u16 = 1180;
pub const ER_DBACCESS_DENIED_ERROR: u16 = 1044;
pub const ER_XAER_NOTA: u16 = 1397;

#[derive(Debug, Error)]
pub enum SessionError {
    #[error("client connection: {0}")]
    ClientIo(#[from] std::io::Error),
    #[error("client closed the connection")]
    ClientClosed,
    #[error("Got a packet bigger than 'max_allowed_packet' bytes ({size} > {max})")]
    PacketTooLarge { size: usize, max: usize },
    #[error("Got packets out of order (sequence id {got}, expected {expected})")]
    OutOfOrder { expected: u8, got: u8 },
    #[error("Malformed communication packet: {0}")]
    Malformed(ProtoError),
    #[error("Couldn't uncompress communication packet: {0}")]
    Uncompress(&'static str),
    /// The rest of a packet (or compressed frame) that had begun did not
    /// arrive within the client's net_read_timeout.
    #[error("Got timeout reading communication packets (sextant: the rest of a packet did not arrive within net_read_timeout, {0} s)")]
    ReadTimeout(u64),
    /// Statements being read by all sessions together would hold more than
    /// [proxy] statement_memory_mb.
    #[error("Out of memory: sextant's sessions are already reading {held_mb} MB of large statements and this one of {size} bytes would pass statement_memory_mb = {max_mb}; retry later, or raise [proxy] statement_memory_mb")]
    StatementMemory {
        size: usize,
        held_mb: usize,
        max_mb: usize,
    },
    #[error("Access denied for user '{user}'@'{host}' (using password: {})", if *.using_password { "YES" } else { "NO" })]
    AccessDenied {
        user: String,
        host: String,
        using_password: bool,
    },
    #[error("Unknown thread id: {0}")]
    NoSuchThread(u64),
    #[error("You are not owner of thread {0}")]
    KillDenied(u64),
    #[error("sextant: KILL QUERY ID and KILL USER are not supported; use KILL [CONNECTION | QUERY] <connection id>")]
    KillUnsupported,
    /// The server's KILL takes an expression; sextant's ids are its own.
    #[error("sextant: KILL takes a connection id as a number (or a string of one, NULL, CONNECTION_ID()), not an expression; nothing was killed")]
    KillExpression,
    #[error("SAVEPOINT {0} does not exist")]
    NoSavepoint(String),
    /// `KILL QUERY CONNECTION_ID()`: the statement interrupted itself.
    #[error("Query execution was interrupted")]
    SelfInterrupted,
    /// A KILL a server would carry out with its own thread ids.
    #[error("sextant: KILL runs as a statement, or among statements of one packet, not as the text of PREPARE, EXECUTE IMMEDIATE or a prepared statement (a server would take the id for one of its own threads); nothing was run; send KILL [CONNECTION | QUERY] <connection id> as a statement")]
    KillNotAlone,
    /// PREPARE or EXECUTE IMMEDIATE of a variable or expression among other
    /// statements of one packet: its text cannot be checked for a KILL.
    #[error("sextant: PREPARE ... FROM or EXECUTE IMMEDIATE of a variable or expression runs only as a statement of its own (sextant reads its text first: it must not be a KILL, which a server would run with its own thread ids); nothing was run")]
    DynamicSqlNotAlone,
    /// A statement naming sextant's own schema.
    #[error("Access denied for user '{0}' to database 'sextant' (sextant: that schema holds sextant's own tables, which no client reads or writes)")]
    OwnSchema(String),
    /// A KILL inside a stored program or compound statement.
    #[error("sextant: KILL inside a stored program or compound statement: a server would run it with its own thread ids, not sextant's; nothing was run; send KILL [CONNECTION | QUERY] <connection id> as a statement")]
    KillInside,
    /// An XA statement sextant cannot see as a statement of its own.
    #[error("sextant: XA statements run only as statements of their own, not among several statements of one packet, inside a stored program or compound statement, or as dynamic SQL (a server lets any account finish any prepared transaction: sextant keeps other sessions' out of reach); nothing was run")]
    XaHidden,
    /// XA RECOVER, which would list other sessions' transactions.
    #[error("sextant: XA RECOVER is not run through sextant: a server lists every account's prepared transactions to any of them; a session finishes the XA transactions it started itself")]
    XaRecover,
    /// XA COMMIT / ROLLBACK of a transaction the session did not start.
    #[error("XAER_NOTA: Unknown XID (sextant: this session did not start XA transaction {0}; a session finishes only the XA transactions it started)")]
    XaNotOwn(String),
    /// Sharding: a statement sextant will not run on the layout, and why.
    #[error("sextant (sharding): {0}")]
    ShardUnsupported(String),
    #[error("sextant: FOUND_ROWS() of the statement before is held by the server connection that ran it (after SQL_CALC_FOUND_ROWS, an UPDATE or DELETE, or an INSERT ... SELECT), which has gone back to the pool; read FOUND_ROWS() right after that statement (within [routing] hold_ms), or count with COUNT(*)")]
    FoundRowsGone,
    #[error("sextant: the warnings of the statement before are held by the server connection that ran it, which has gone back to the pool (other sessions were waiting for it, or the session paused); read them right after that statement")]
    WarningsGone,
    #[error("sextant: FOUND_ROWS() after a read of one row or none is that count, or what it was before when the server found the read's WHERE impossible (an aggregate then sends its one row and leaves FOUND_ROWS() alone); sextant cannot tell which, and no server connection holds the session's earlier value; use SQL_CALC_FOUND_ROWS, or count with COUNT(*)")]
    FoundRowsUnsure,
    /// Sharding: a merge over several groups would hold more than its
    /// bound.
    #[error("sextant (sharding): this read's merge over several groups needs more than merge_memory_mb = {0} MB (groups sorted by an aggregate are held until the last arrives); add a LIMIT, restrict it by the shard key, or raise [sharding] merge_memory_mb")]
    ShardMergeMemory(usize),
    /// Sharding: a DDL that ran on some groups and failed on one.
    #[error("sextant (sharding): {0}")]
    ShardPartial(String),
    #[error("Host '{0}' is blocked because of many failed logins (sextant: max_failed_logins); it is let in again after failed_login_lockout_ms")]
    HostBlocked(String),
    #[error(
        "Connections using insecure transport are prohibited: user '{0}' must connect with TLS"
    )]
    InsecureTransport(String),
    #[error("Bad handshake: {0}")]
    Handshake(String),
    #[error("Too many connections (sextant max_connections = {0})")]
    TooManyConnections(usize),
    #[error("Unknown command 0x{0:02x}")]
    UnknownCommand(u8),
    #[error("Unknown prepared statement handler ({id}) given to {command}")]
    UnknownStatement { id: u32, command: &'static str },
    #[error("sextant: group {group} has no primary to write to (none is writable, or several are: split brain), after waiting {waited_ms} ms")]
    NoPrimary { group: String, waited_ms: u64 },
    #[error("sextant: the primary {addr} of group {group} is in maintenance (the admin port's SET BACKEND '{addr}' STATE online ends it), after waiting {waited_ms} ms; the statement did not run")]
    PrimaryInMaintenance {
        group: String,
        addr: String,
        waited_ms: u64,
    },
    #[error("sextant: cannot connect to {addr}, the primary of group {group} ({why}); the statement did not run (the other groups are served)")]
    PrimaryUnreachable {
        group: String,
        addr: String,
        why: String,
    },
    #[error("{}", match .0 {
        Refusal::WriteInReplicaTransaction => "Cannot execute statement in a READ ONLY transaction (sextant: the transaction runs on a replica, and this statement may write)",
        Refusal::WriteOnReplicaState => "sextant: this session's state (reported by the server after a read) lives on a replica connection, so a statement that may write cannot run; reset the connection (COM_RESET_CONNECTION) first",
    })]
    WriteOnReplica(Refusal),
    #[error("User '{user}' has exceeded the 'max_user_connections' resource (current value: {max}; sextant's max_connections for the user: in a fleet, this instance's share of it)")]
    UserConnections { user: String, max: usize },
    #[error("sextant: the session was idle in a transaction for more than idle_in_transaction_timeout_ms ({0} ms); the transaction was rolled back and the connection closed")]
    IdleInTransaction(u64),
    #[error("Can't create more than max_prepared_stmt_count statements (current value: {0}; sextant's max_prepared_statements per session)")]
    TooManyPrepared(usize),
    /// A distributed transaction was rolled back on every group (or can
    /// only be), and why.
    #[error("sextant: the transaction over several groups was rolled back: {0}")]
    XaRolledBack(String),
    /// A commit whose outcome sextant cannot know (a one-phase commit's
    /// connection lost before its answer).
    #[error("sextant: the commit's outcome is unknown: {0}; check the data before retrying")]
    XaUnknown(String),
    #[error("Server shutdown in progress (sextant is shutting down; the statement did not run)")]
    ServerShutdown,
    /// The admin port's RELOAD CONFIG, refused: the file's problems.
    #[error("sextant: config not reloaded, the running config stays: {0}")]
    ReloadRefused(String),
    #[error("sextant: switchover not done: {0}")]
    Switchover(String),
    /// The admin port's `SET <routing key>`, refused: what is wrong.
    #[error("{0}")]
    RoutingRefused(String),
    /// The admin port's PUSH CONFIG, refused: the file's problems.
    #[error("sextant: config not pushed, the fleet's config stays: {0}")]
    PushRefused(String),
    /// An admin change for the fleet, not made.
    #[error("sextant: {0}")]
    Fleet(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("sextant: the session's {what} on {addr} is gone: that server was replaced as group {group}'s primary (term {term}){replay}; nothing of this statement ran{retry}")]
    FailedOver {
        group: String,
        addr: String,
        term: u64,
        what: &'static str,
        retry: &'static str,
        /// Why the transaction was not replayed ("" when no replay was
        /// tried).
        replay: String,
    },
    #[error("sextant lost its connection to server {addr} inside a transaction ({reason}): the transaction is rolled back{replay}; this statement was not retried; run the transaction again")]
    TransactionLost {
        addr: String,
        reason: String,
        replay: String,
    },
    #[error("sextant lost its connection to server {addr} during the statement ({reason}); it may or may not have run, and was not retried")]
    BackendLost { addr: String, reason: String },
}

impl SessionError {
    /// Says, in a transaction-lost error, why the transaction was not
    /// replayed.
    pub fn not_replayed(&mut self, why: &str) {
        if let SessionError::TransactionLost { replay, .. }
        | SessionError::FailedOver { replay, .. } = self
        {
            *replay = format!(" and could not be replayed ({why})");
        }
    }

    /// (errno, SQLSTATE, message) for the client.
    pub fn mysql(&self) -> (u16, &'static str, String) {
        use SessionError::*;
        let msg = self.to_string();
        match self {
            ClientIo(_) | ClientClosed => (CR_SERVER_LOST, "HY000", msg),
            PacketTooLarge { .. } => (ER_NET_PACKET_TOO_LARGE, "08S01", msg),
            OutOfOrder { .. } => (ER_NET_PACKETS_OUT_OF_ORDER, "08S01", msg),
            Malformed(_) => (ER_MALFORMED_PACKET, "HY000", msg),
            Uncompress(_) => (ER_NET_UNCOMPRESS_ERROR, "08S01", msg),
            ReadTimeout(_) => (ER_NET_READ_INTERRUPTED, "08S01", msg),
            StatementMemory { .. } => (ER_OUT_OF_RESOURCES, "HY000", msg),
            AccessDenied { .. } => (ER_ACCESS_DENIED_ERROR, "28000", msg),
            HostBlocked(_) => (ER_HOST_IS_BLOCKED, "HY000", msg),
            NoSuchThread(_) => (ER_NO_SUCH_THREAD, "HY000", msg),
            KillDenied(_) => (ER_KILL_DENIED_ERROR, "HY000", msg),
            SelfInterrupted => (ER_QUERY_INTERRUPTED, "70100", msg),
            NoSavepoint(_) => (ER_SP_DOES_NOT_EXIST, "42000", msg),
            KillUnsupported | KillExpression | KillNotAlone | DynamicSqlNotAlone
            | ShardUnsupported(_) | KillInside | XaHidden | XaRecover | FoundRowsGone
            | WarningsGone | FoundRowsUnsure => (ER_NOT_SUPPORTED_YET, "42000", msg),
            OwnSchema(_) => (ER_DBACCESS_DENIED_ERROR, "42000", msg),
            XaNotOwn(_) => (ER_XAER_NOTA, "XAE04", msg),
            ShardPartial(_) => (ER_SEXTANT_SHARD_PARTIAL, "HY000", msg),
            XaRolledBack(_) => (ER_XA_RBROLLBACK, "XA100", msg),
            XaUnknown(_) => (ER_ERROR_DURING_COMMIT, "HY000", msg),
            ShardMergeMemory(_) => (ER_OUT_OF_SORTMEMORY, "HY001", msg),
            Handshake(_) => (ER_HANDSHAKE_ERROR, "08S01", msg),
            InsecureTransport(_) => (ER_SECURE_TRANSPORT_REQUIRED, "HY000", msg),
            TooManyConnections(_) => (ER_CON_COUNT_ERROR, "08004", msg),
            UnknownCommand(_) => (ER_UNKNOWN_COM_ERROR, "08S01", msg),
            UnknownStatement { .. } => (ER_UNKNOWN_STMT_HANDLER, "HY000", msg),
            BackendLost { .. } => (ER_SEXTANT_BACKEND_LOST, "HY000", msg),
            FailedOver { .. } => (ER_SEXTANT_FAILED_OVER, "40001", msg),
            TransactionLost { .. } => (ER_SEXTANT_BACKEND_LOST, "40001", msg),
            PrimaryUnreachable { .. } => (ER_SEXTANT_NO_BACKEND, "HY000", msg),
            NoPrimary { .. } | PrimaryInMaintenance { .. } => (ER_SEXTANT_NO_PRIMARY, "HY000", msg),
            ReloadRefused(_) | PushRefused(_) => (ER_SEXTANT_CONFIG, "HY000", msg),
            Switchover(_) => (ER_SEXTANT_SWITCHOVER, "HY000", msg),
            RoutingRefused(_) => (ER_WRONG_VALUE_FOR_VAR, "42000", msg),
            Fleet(_) => (ER_SEXTANT_FLEET, "HY000", msg),
            ServerShutdown => (ER_SERVER_SHUTDOWN, "08S01", msg),
            // The codes a client gets from a server that refuses a write:
            // applications already treat them as "nothing was written".
            WriteOnReplica(Refusal::WriteInReplicaTransaction) => {
                (ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, "25006", msg)
            }
            WriteOnReplica(Refusal::WriteOnReplicaState) => {
                (ER_OPTION_PREVENTS_STATEMENT, "HY000", msg)
            }
            TooManyPrepared(_) => (ER_MAX_PREPARED_STMT_COUNT_REACHED, "42000", msg),
            UserConnections { .. } => (ER_USER_LIMIT_REACHED, "42000", msg),
            IdleInTransaction(_) => (ER_CLIENT_INTERACTION_TIMEOUT, "HY000", msg),
            Backend(b) => match b {
                // A server's own answer to a statement sextant sent for the
                // client (restoring its database, say) keeps the server's
                // code, so the client sees what it would have seen directly.
                BackendError::Database {
                    code,
                    sql_state,
                    message,
                    ..
                } => {
                    let st = match sql_state.as_str() {
                        "42000" => "42000",
                        "28000" => "28000",
                        _ => "HY000",
                    };
                    (*code, st, message.clone())
                }
                BackendError::Server { .. } => {
                    (ER_SEXTANT_STATE_RESTORE, "HY000", format!("sextant: {msg}"))
                }
                _ => (ER_SEXTANT_NO_BACKEND, "HY000", format!("sextant: {msg}")),
            },
        }
    }
}

/// Why the proxy could not start.
#[derive(Debug, Error)]
pub enum StartError {
    #[error("{what}: {source}")]
    Tls {
        what: String,
        source: sextant_net::NetError,
    },
    #[error("user {user} names unknown group {group}")]
    UnknownGroup { user: String, group: String },
    #[error("cannot listen on {addr}{which}: {source}")]
    Listen {
        addr: String,
        which: &'static str,
        source: std::io::Error,
    },
    #[error("[xa]: {0}")]
    Xa(String),
    #[error("[cluster]: {0}")]
    Fleet(String),
    #[error("cannot start {what}: {source}")]
    Thread {
        what: String,
        source: std::io::Error,
    },
}
