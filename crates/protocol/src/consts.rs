//! Capability flags, status flags and command bytes.

pub mod cap {
    pub const LONG_PASSWORD: u32 = 1;
    pub const FOUND_ROWS: u32 = 1 << 1;
    pub const LONG_FLAG: u32 = 1 << 2;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const NO_SCHEMA: u32 = 1 << 4;
    pub const COMPRESS: u32 = 1 << 5;
    pub const ODBC: u32 = 1 << 6;
    pub const LOCAL_FILES: u32 = 1 << 7;
    pub const IGNORE_SPACE: u32 = 1 << 8;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const INTERACTIVE: u32 = 1 << 10;
    pub const SSL: u32 = 1 << 11;
    pub const IGNORE_SIGPIPE: u32 = 1 << 12;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const RESERVED: u32 = 1 << 14;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    pub const CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 1 << 22;
    pub const SESSION_TRACK: u32 = 1 << 23;
    pub const DEPRECATE_EOF: u32 = 1 << 24;
    pub const OPTIONAL_RESULTSET_METADATA: u32 = 1 << 25;
    pub const ZSTD_COMPRESSION: u32 = 1 << 26;
    pub const QUERY_ATTRIBUTES: u32 = 1 << 27;
}

pub mod status {
    pub const IN_TRANS: u16 = 1;
    pub const AUTOCOMMIT: u16 = 1 << 1;
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
    pub const NO_GOOD_INDEX_USED: u16 = 1 << 4;
    pub const NO_INDEX_USED: u16 = 1 << 5;
    pub const CURSOR_EXISTS: u16 = 1 << 6;
    pub const LAST_ROW_SENT: u16 = 1 << 7;
    pub const DB_DROPPED: u16 = 1 << 8;
    pub const NO_BACKSLASH_ESCAPES: u16 = 1 << 9;
    pub const METADATA_CHANGED: u16 = 1 << 10;
    pub const QUERY_WAS_SLOW: u16 = 1 << 11;
    pub const PS_OUT_PARAMS: u16 = 1 << 12;
    pub const IN_TRANS_READONLY: u16 = 1 << 13;
    pub const SESSION_STATE_CHANGED: u16 = 1 << 14;
    /// The flags that describe the session rather than the statement
    /// just run: what an answer a proxy writes itself carries (the
    /// others, no index used, slow, last row sent, are one statement's).
    pub const SESSION: u16 = IN_TRANS | AUTOCOMMIT | NO_BACKSLASH_ESCAPES | IN_TRANS_READONLY;
}

pub mod com {
    pub const SLEEP: u8 = 0x00;
    pub const QUIT: u8 = 0x01;
    pub const INIT_DB: u8 = 0x02;
    pub const QUERY: u8 = 0x03;
    pub const FIELD_LIST: u8 = 0x04;
    pub const CREATE_DB: u8 = 0x05;
    pub const DROP_DB: u8 = 0x06;
    pub const REFRESH: u8 = 0x07;
    pub const SHUTDOWN: u8 = 0x08;
    pub const STATISTICS: u8 = 0x09;
    pub const PROCESS_INFO: u8 = 0x0a;
    pub const CONNECT: u8 = 0x0b;
    pub const PROCESS_KILL: u8 = 0x0c;
    pub const DEBUG: u8 = 0x0d;
    pub const PING: u8 = 0x0e;
    pub const TIME: u8 = 0x0f;
    pub const DELAYED_INSERT: u8 = 0x10;
    pub const CHANGE_USER: u8 = 0x11;
    pub const BINLOG_DUMP: u8 = 0x12;
    pub const TABLE_DUMP: u8 = 0x13;
    pub const CONNECT_OUT: u8 = 0x14;
    pub const REGISTER_SLAVE: u8 = 0x15;
    pub const STMT_PREPARE: u8 = 0x16;
    pub const STMT_EXECUTE: u8 = 0x17;
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const STMT_CLOSE: u8 = 0x19;
    pub const STMT_RESET: u8 = 0x1a;
    pub const SET_OPTION: u8 = 0x1b;
    pub const STMT_FETCH: u8 = 0x1c;
    /// MariaDB: one statement, many rows of parameters.
    pub const STMT_BULK_EXECUTE: u8 = 0xfa;
    pub const DAEMON: u8 = 0x1d;
    pub const BINLOG_DUMP_GTID: u8 = 0x1e;
    pub const RESET_CONNECTION: u8 = 0x1f;
}

/// COM_STMT_EXECUTE flags byte.
pub mod cursor {
    pub const NO_CURSOR: u8 = 0;
    pub const READ_ONLY: u8 = 1;
}

/// Session-state-change types inside an OK packet (CLIENT_SESSION_TRACK).
pub mod track {
    pub const SYSTEM_VARIABLES: u8 = 0;
    pub const SCHEMA: u8 = 1;
    pub const STATE_CHANGE: u8 = 2;
    pub const GTIDS: u8 = 3;
    pub const TRANSACTION_CHARACTERISTICS: u8 = 4;
    pub const TRANSACTION_STATE: u8 = 5;
}

/// MariaDB's extended capabilities: the 4 bytes of the handshake's
/// reserved area that a MariaDB server or client fills when it leaves out
/// CLIENT_MYSQL (`cap::LONG_PASSWORD`).
pub mod mariadb_cap {
    pub const PROGRESS: u32 = 1;
    pub const STMT_BULK_OPERATIONS: u32 = 1 << 2;
    /// Column definitions carry the extended type (`uuid`, `inet6`) and
    /// format (`json`) of a column.
    pub const EXTENDED_METADATA: u32 = 1 << 3;
    pub const CACHE_METADATA: u32 = 1 << 4;
}

pub const NATIVE_PASSWORD: &str = "mysql_native_password";
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
pub const CLEAR_PASSWORD: &str = "mysql_clear_password";
pub const SHA256_PASSWORD: &str = "sha256_password";
/// MariaDB's ed25519 plugin, as its client side is named.
pub const ED25519: &str = "client_ed25519";
