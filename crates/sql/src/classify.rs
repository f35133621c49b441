//! Statement classification: what a statement is, whether a replica may run
//! it, and what it does to session state that the proxy must respect.

use crate::blocks::{Blocks, Seen};
use crate::hints::Hints;
use crate::lexer::{LexMode, Lexer, Token, TokenKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    Load,
    Set,
    Use,
    Show,
    Explain,
    Begin,
    Commit,
    Rollback,
    Savepoint,
    Lock,
    Unlock,
    Ddl,
    Call,
    Do,
    Prepare,
    Execute,
    Deallocate,
    Handler,
    Xa,
    Flush,
    Kill,
    Other,
}

bitflags::bitflags! {
    /// Properties of a statement that decide where it may run and whether
    /// the session must stay on its server connection afterwards.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Flags: u32 {
        /// SELECT ... FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE.
        const LOCKING_READ = 1;
        /// Reads or assigns a user variable (`@x`): user variables live on one
        /// server connection.
        const USER_VAR = 1 << 1;
        /// CREATE TEMPORARY TABLE.
        const TEMP_TABLE = 1 << 2;
        /// GET_LOCK and friends: named locks belong to one server connection.
        const NAMED_LOCK = 1 << 3;
        /// LOCK TABLES / FLUSH TABLES WITH READ LOCK.
        const LOCK_TABLES = 1 << 4;
        const UNLOCK_TABLES = 1 << 5;
        /// SQL-level PREPARE / EXECUTE / DEALLOCATE.
        const SQL_PREPARE = 1 << 6;
        /// LAST_INSERT_ID(), @@identity, @@last_insert_id: value of the previous
        /// statement on the same server connection.
        const LAST_INSERT_ID = 1 << 7;
        /// FOUND_ROWS() or SQL_CALC_FOUND_ROWS.
        const FOUND_ROWS = 1 << 8;
        const ROW_COUNT = 1 << 9;
        /// SELECT ... INTO OUTFILE / DUMPFILE: writes a file on the server.
        const INTO_FILE = 1 << 10;
        /// NEXTVAL / LASTVAL / SETVAL / NEXT VALUE FOR: sequences write.
        const SEQUENCE = 1 << 11;
        /// More than one statement in the packet.
        const MULTI = 1 << 12;
        /// START TRANSACTION READ ONLY.
        const READ_ONLY_TRX = 1 << 13;
        /// SET TRANSACTION ... (no SESSION/GLOBAL): applies to the next
        /// transaction of this server connection only.
        const NEXT_TRX = 1 << 14;
        /// HANDLER ... OPEN/READ: a cursor on one server connection.
        const HANDLER = 1 << 15;
        /// Calls a function that is not built in (a stored function, which may
        /// write).
        const STORED_FUNCTION = 1 << 16;
        /// Calls a function built in to MySQL but not to MariaDB: on
        /// MariaDB the name is a stored function or a UDF.
        const MYSQL_FUNCTION = 1 << 17;
        /// Calls a function built in to MariaDB but not to MySQL.
        const MARIADB_FUNCTION = 1 << 18;
        /// DDL that may create, change or drop a view or a function (what
        /// a [`crate::Catalogue`] holds).
        const CATALOGUE = 1 << 19;
        /// Asks about the client's own connection (`CONNECTION_ID()`, its
        /// timeouts or session tracking): the proxy answers with the
        /// client's values ([`crate::session_info`]).
        const SESSION_INFO = 1 << 20;
        /// Names a `session_track_*` variable: a SET of one changes what the
        /// client is to be sent, which the server does not always report.
        const TRACKING = 1 << 21;
        /// A KILL among several statements of one packet: the proxy's to
        /// carry out (a server would take its id for one of its own
        /// threads), the others the server's ([`kill_spans`]).
        const KILL = 1 << 22;
        /// The text of dynamic SQL (PREPARE ... FROM, EXECUTE IMMEDIATE)
        /// is a KILL, which the server would run with its own thread ids.
        const DYNAMIC_KILL = 1 << 23;
        /// Reads a table (or view) the server's catalogue did not list when
        /// it was last read: it may be a view created since, whose
        /// definition calls a function that writes (set by a
        /// [`crate::Catalogue`] that lists tables).
        const UNKNOWN_TABLE = 1 << 24;
        /// An XA statement that is not the packet's only statement: among
        /// several, inside a compound statement or a stored program's
        /// body, or as the text of dynamic SQL. Sextant coordinates XA
        /// itself on a sharded layout, and a server lets any account
        /// finish any prepared branch: such a statement is refused.
        const XA = 1 << 25;
        /// A KILL inside a compound statement or a stored program's
        /// body: the server would run it with its own thread ids.
        const INNER_KILL = 1 << 26;
        /// Names sextant's own schema (`sextant`): its tables are
        /// sextant's machinery, never a client's to read or write.
        const OWN_SCHEMA = 1 << 27;
        /// Holds a compound statement (BEGIN ... END, IF, CASE, LOOP,
        /// WHILE, REPEAT) or creates a stored program: its semicolons are
        /// its own.
        const COMPOUND = 1 << 28;
        /// Dynamic SQL whose text is not spelt out (PREPARE ... FROM @v,
        /// EXECUTE IMMEDIATE CONCAT(...)) inside a compound statement or
        /// a stored program's body: what it runs is known only when it
        /// runs.
        const INNER_DYNAMIC = 1 << 29;
        /// A read with OFFSET, UNION, INTERSECT or EXCEPT: FOUND_ROWS()
        /// after it counts rows it did not send (the skipped ones, the
        /// union's whole before its LIMIT).
        const UNSENT_ROWS = 1 << 30;
        /// A read with LIMIT (`LIMIT m, n` skips m).
        const LIMIT = 1 << 31;
        /// Calls a function that may write, whichever server runs it
        /// (until the server's flavor is known, both of the above count).
        const MAY_WRITE_FUNCTION = Self::STORED_FUNCTION.bits()
            | Self::MYSQL_FUNCTION.bits()
            | Self::MARIADB_FUNCTION.bits();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification<'a> {
    /// Kind of the first statement.
    pub kind: Kind,
    pub flags: Flags,
    /// True when every statement in the packet is a plain read that a
    /// replica can answer (not locking, not writing a file or a sequence).
    pub read_only: bool,
    pub hints: Hints<'a>,
}

impl Classification<'_> {
    /// Statements whose result depends on the previous statement of the same
    /// server connection.
    pub fn needs_previous_connection(&self) -> bool {
        self.flags
            .intersects(Flags::LAST_INSERT_ID | Flags::FOUND_ROWS | Flags::ROW_COUNT)
    }

    /// Whether running the statement may change data (or the schema) on
    /// the server: anything but a plain read, a locking read, or a
    /// statement that only ends a transaction or reads status. Unknown
    /// statements may write. Nothing that may write runs on a replica.
    pub fn may_write(&self) -> bool {
        if self.read_only {
            // A read that calls a stored function may write through it.
            return self.flags.intersects(Flags::MAY_WRITE_FUNCTION);
        }
        if self.flags.contains(Flags::MULTI) {
            return true;
        }
        match self.kind {
            Kind::Commit
            | Kind::Rollback
            | Kind::Savepoint
            | Kind::Begin
            | Kind::Show
            | Kind::Explain
            | Kind::Use
            | Kind::Empty => false,
            // A locking read locks; anything else a SELECT does besides
            // reading (INTO OUTFILE, a sequence, INTO @variable, a stored
            // function) counts as a write.
            Kind::Select => {
                !self.flags.contains(Flags::LOCKING_READ)
                    || self
                        .flags
                        .intersects(Flags::INTO_FILE | Flags::SEQUENCE | Flags::MAY_WRITE_FUNCTION)
            }
            _ => true,
        }
    }

    /// A read that a replica may run and that leaves nothing behind on its
    /// connection: what a READONLY hint may send to a replica.
    pub fn plain_read(&self) -> bool {
        let reads = self.read_only
            || (matches!(self.kind, Kind::Show | Kind::Explain)
                && !self.flags.contains(Flags::MULTI));
        // A name the catalogue did not list may be a view that writes.
        reads
            && !self.may_write()
            && !self.pins_session()
            && !self.needs_previous_connection()
            && !self.flags.contains(Flags::UNKNOWN_TABLE)
    }

    /// Whether this classification read nothing inside the statement's
    /// string literals, so that the same statement with other strings
    /// classifies alike (what shapes with strings rest on). The classifier reads a string
    /// only as the text of dynamic SQL (PREPARE ... FROM '...', EXECUTE
    /// IMMEDIATE '...', also inside a compound statement); a single
    /// SELECT, INSERT, UPDATE, DELETE or REPLACE has none.
    pub fn strings_unread(&self) -> bool {
        matches!(
            self.kind,
            Kind::Select | Kind::Insert | Kind::Update | Kind::Delete | Kind::Replace
        ) && !self.flags.intersects(
            Flags::MULTI
                | Flags::COMPOUND
                | Flags::SQL_PREPARE
                | Flags::INNER_DYNAMIC
                | Flags::DYNAMIC_KILL,
        )
    }

    /// Statements after which the session's state lives on its server
    /// connection and cannot be moved.
    pub fn pins_session(&self) -> bool {
        self.flags.pins_session()
    }
}

impl Flags {
    /// Statements with these leave state on their server connection that
    /// cannot be moved.
    pub fn pins_session(self) -> bool {
        self.intersects(
            Flags::USER_VAR
                | Flags::TEMP_TABLE
                | Flags::NAMED_LOCK
                | Flags::LOCK_TABLES
                | Flags::SQL_PREPARE
                | Flags::HANDLER,
        )
    }
}

fn first_kind(w: &Token<'_>) -> Kind {
    if w.kind != TokenKind::Word {
        return Kind::Other;
    }
    let t = w.text;
    let is = |k: &str| t.eq_ignore_ascii_case(k.as_bytes());
    match t.len() {
        2 if is("DO") => Kind::Do,
        2 if is("XA") => Kind::Xa,
        3 if is("SET") => Kind::Set,
        3 if is("USE") => Kind::Use,
        4 if is("SHOW") => Kind::Show,
        4 if is("DESC") => Kind::Explain,
        4 if is("LOCK") => Kind::Lock,
        4 if is("LOAD") => Kind::Load,
        4 if is("DROP") => Kind::Ddl,
        4 if is("CALL") => Kind::Call,
        4 if is("KILL") => Kind::Kill,
        4 if is("WITH") => Kind::Select,
        5 if is("BEGIN") => Kind::Begin,
        5 if is("START") => Kind::Begin,
        5 if is("ALTER") => Kind::Ddl,
        5 if is("FLUSH") => Kind::Flush,
        5 if is("TABLE") => Kind::Select,
        6 if is("SELECT") => Kind::Select,
        6 if is("INSERT") => Kind::Insert,
        6 if is("UPDATE") => Kind::Update,
        6 if is("DELETE") => Kind::Delete,
        6 if is("COMMIT") => Kind::Commit,
        6 if is("CREATE") => Kind::Ddl,
        6 if is("RENAME") => Kind::Ddl,
        6 if is("UNLOCK") => Kind::Unlock,
        6 if is("VALUES") => Kind::Select,
        7 if is("REPLACE") => Kind::Replace,
        7 if is("EXPLAIN") => Kind::Explain,
        7 if is("PREPARE") => Kind::Prepare,
        7 if is("EXECUTE") => Kind::Execute,
        7 if is("HANDLER") => Kind::Handler,
        7 if is("RELEASE") => Kind::Savepoint,
        8 if is("ROLLBACK") => Kind::Rollback,
        8 if is("DESCRIBE") => Kind::Explain,
        8 if is("TRUNCATE") => Kind::Ddl,
        9 if is("SAVEPOINT") => Kind::Savepoint,
        10 if is("DEALLOCATE") => Kind::Deallocate,
        _ => Kind::Other,
    }
}

/// Per-statement scan state.
struct Segment {
    kind: Kind,
    /// Words seen so far in this statement (saturating).
    words: u32,
    depth: u32,
    read_only: bool,
    /// The statement is WITH ...: a DML keyword at depth 0 makes it a write.
    with: bool,
}

impl Segment {
    fn new() -> Self {
        Segment {
            kind: Kind::Empty,
            words: 0,
            depth: 0,
            read_only: true,
            with: false,
        }
    }
}

/// Classifies a statement as a session with the server's default sql_mode
/// and a single-byte or UTF-8 character set would send it (see
/// [`classify_in`]).
pub fn classify(sql: &[u8]) -> Classification<'_> {
    classify_in(sql, || LexMode::DEFAULT)
}

/// Classifies a statement. If its reading depends on the session's
/// sql_mode or character set (a backslash inside quotes, "...", or a
/// multibyte character ending in a backslash or backtick), it is read the
/// other ways too: with NO_BACKSLASH_ESCAPES and ANSI_QUOTES, and in the
/// session's own mode (asked of `session` only then). The answer is the
/// most careful of them: every flag any reading found, and a read only if
/// all say so. So a string that hides a function call in one reading never
/// sends it to a replica, even when the session's mode is not what sextant
/// believes (a procedure may change it).
pub fn classify_in<F: FnOnce() -> LexMode>(sql: &[u8], session: F) -> Classification<'_> {
    classify_observing(sql, session, |_| {}).0
}

/// [`classify_in`], showing each token of the first reading (the default
/// lexing mode) to `observe` as it goes, so that a caller with more to
/// learn from the tokens reads the statement once; also says whether the
/// tokens depend on the lexing mode (then the caller's own reading of
/// them holds for the default mode only).
pub(crate) fn classify_observing<'a, F: FnOnce() -> LexMode>(
    sql: &'a [u8],
    session: F,
    observe: impl FnMut(&Token<'a>),
) -> (Classification<'a>, bool) {
    let (mut c, dependent) = classify_with(sql, LexMode::DEFAULT, observe);
    if dependent {
        let own = session();
        for (i, mode) in [LexMode::OTHER, own].into_iter().enumerate() {
            if mode == LexMode::DEFAULT || (i == 1 && own == LexMode::OTHER) {
                continue;
            }
            let (other, _) = classify_with(sql, mode, |_| {});
            c.flags |= other.flags;
            c.read_only &= other.read_only;
            if other.kind != c.kind {
                c.read_only = false;
            }
        }
    }
    (c, dependent)
}

fn classify_with<'a>(
    sql: &'a [u8],
    mode: LexMode,
    mut observe: impl FnMut(&Token<'a>),
) -> (Classification<'a>, bool) {
    let mut hints = Hints::default();
    let mut flags = Flags::default();
    let mut first_kind_seen = Kind::Empty;
    let mut all_read = true;
    let mut segments = 0u32;
    let mut seg = Segment::new();
    // The last two tokens, for two- and three-word phrases.
    let mut p1: Option<Token<'_>> = None;
    let mut p2: Option<Token<'_>> = None;

    let mut finish = |seg: &Segment, flags: &mut Flags| -> bool {
        if seg.kind == Kind::Empty {
            return false;
        }
        if seg.kind == Kind::Kill {
            flags.insert(Flags::KILL);
        }
        if seg.kind == Kind::Xa {
            flags.insert(Flags::XA);
        }
        let read = seg.kind == Kind::Select
            && seg.read_only
            && !flags.intersects(Flags::LOCKING_READ | Flags::INTO_FILE | Flags::SEQUENCE);
        all_read &= read;
        true
    };

    let mut blocks = Blocks::new();
    // The kind of the statement inside a block being read.
    let mut inner = Kind::Empty;
    let mut lexer = Lexer::with_mode(sql, mode);
    for t in lexer.by_ref() {
        observe(&t);
        if t.kind == TokenKind::Hint {
            hints.add_comment(t.text);
            continue;
        }
        let outside = blocks.outside();
        let within = blocks.within();
        if blocks.token(&t) == Seen::Inner {
            inner = first_kind(&t);
            match inner {
                Kind::Kill => flags.insert(Flags::INNER_KILL),
                Kind::Xa => flags.insert(Flags::XA),
                _ => {}
            }
        }
        if within {
            inner_token(&t, inner, p1, mode, &mut flags);
        }
        match t.kind {
            TokenKind::Punct => match t.text[0] {
                b'(' => {
                    if let Some(p) =
                        p1.filter(|p| p.kind == TokenKind::Word || p.kind == TokenKind::QuotedIdent)
                    {
                        function_call(p.text, &mut flags);
                        // db.f(...) or an unknown name: a stored function.
                        let qualified = p2.is_some_and(|t| t.is_punct(b'.'));
                        if seg.kind == Kind::Select {
                            use crate::builtin::{builtin, Builtin};
                            match builtin(p.text) {
                                _ if qualified || p.kind == TokenKind::QuotedIdent => {
                                    flags.insert(Flags::STORED_FUNCTION)
                                }
                                Builtin::No => flags.insert(Flags::STORED_FUNCTION),
                                Builtin::MysqlOnly => flags.insert(Flags::MYSQL_FUNCTION),
                                Builtin::MariadbOnly => flags.insert(Flags::MARIADB_FUNCTION),
                                Builtin::Both => {}
                            }
                        }
                    }
                    seg.depth += 1;
                }
                b')' => seg.depth = seg.depth.saturating_sub(1),
                b'.' if p1.is_some_and(|p| own_schema(&p)) => flags.insert(Flags::OWN_SCHEMA),
                b';' if seg.depth == 0 && outside => {
                    if finish(&seg, &mut flags) {
                        segments += 1;
                    }
                    seg = Segment::new();
                    p1 = None;
                    p2 = None;
                    continue;
                }
                _ => {}
            },
            TokenKind::Str if matches!(seg.kind, Kind::Prepare | Kind::Execute) => {
                flags.insert(dynamic_reach(t.text, mode));
            }
            TokenKind::QuotedIdent if names_schema(p1, seg.kind) && own_schema(&t) => {
                flags.insert(Flags::OWN_SCHEMA)
            }
            TokenKind::UserVar => {
                flags.insert(Flags::USER_VAR);
                if p1.is_some_and(|p| p.is_word("INTO")) && seg.kind == Kind::Select {
                    seg.read_only = false;
                }
            }
            TokenKind::SysVar => {
                let name = t.text.rsplit(|&c| c == b'.').next().unwrap_or(t.text);
                let name = name.strip_prefix(b"@@").unwrap_or(name);
                if name.eq_ignore_ascii_case(b"identity")
                    || name.eq_ignore_ascii_case(b"last_insert_id")
                {
                    flags.insert(Flags::LAST_INSERT_ID);
                }
                if crate::session_info::is_warning_count(t.text) {
                    flags.insert(Flags::SESSION_INFO);
                }
                if let Some(v) = crate::session_info::client_variable(t.text) {
                    flags.insert(Flags::SESSION_INFO);
                    if v.starts_with("session_track_") {
                        flags.insert(Flags::TRACKING);
                    }
                }
            }
            TokenKind::Word => {
                seg.words = seg.words.saturating_add(1);
                if t.text.len() == 7 && names_schema(p1, seg.kind) && own_schema(&t) {
                    flags.insert(Flags::OWN_SCHEMA);
                }
                if t.text.len() > 14 && t.text[..14].eq_ignore_ascii_case(b"session_track_") {
                    flags.insert(Flags::TRACKING);
                }
                if seg.kind == Kind::Empty {
                    seg.kind = first_kind(&t);
                    seg.with = t.is_word("WITH");
                    if first_kind_seen == Kind::Empty {
                        first_kind_seen = seg.kind;
                    }
                    match seg.kind {
                        Kind::Prepare | Kind::Execute | Kind::Deallocate => {
                            flags.insert(Flags::SQL_PREPARE)
                        }
                        Kind::Handler => flags.insert(Flags::HANDLER),
                        _ => {}
                    }
                } else {
                    word_in_statement(&t, p1, p2, &mut seg, &mut flags);
                }
            }
            _ => {}
        }
        p2 = p1;
        p1 = Some(t);
    }
    if finish(&seg, &mut flags) {
        segments += 1;
    }
    if segments > 1 {
        flags.insert(Flags::MULTI);
    } else if first_kind_seen == Kind::Kill {
        // A KILL alone is the proxy's to carry out (by its kind).
        flags.remove(Flags::KILL);
    } else if first_kind_seen == Kind::Xa {
        // An XA statement alone is known by its kind.
        flags.remove(Flags::XA);
    }
    if blocks.compound {
        flags.insert(Flags::COMPOUND);
    }
    let c = Classification {
        kind: first_kind_seen,
        flags,
        read_only: segments > 0 && all_read,
        hints,
    };
    (c, lexer.mode_dependent)
}

/// The byte ranges of a packet's statements (each from its first token to
/// its last, its `;` left out).
pub fn statement_spans(sql: &[u8], mode: LexMode) -> Vec<std::ops::Range<usize>> {
    let base = sql.as_ptr() as usize;
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut open: Option<usize> = None;
    let mut last_end = 0usize;
    let mut blocks = Blocks::new();
    for t in Lexer::with_mode(sql, mode) {
        if t.kind == TokenKind::Hint {
            continue;
        }
        let start = t.text.as_ptr() as usize - base;
        let outside = blocks.outside();
        blocks.token(&t);
        if t.is_punct(b';') && depth == 0 && outside {
            if let Some(s) = open.take() {
                out.push(s..last_end);
            }
            continue;
        }
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        }
        open.get_or_insert(start);
        last_end = start
            + t.text.len()
            + match t.kind {
                // The closing quote.
                TokenKind::QuotedIdent => 1,
                _ => 0,
            };
    }
    if let Some(s) = open {
        out.push(s..last_end.min(sql.len()));
    }
    out
}

/// The byte ranges of the KILL statements among a packet's statements.
pub fn kill_spans(sql: &[u8], mode: LexMode) -> Vec<std::ops::Range<usize>> {
    statement_spans(sql, mode)
        .into_iter()
        .filter(|r| is_kill(&sql[r.clone()]))
        .collect()
}

/// What a string literal, as the text of dynamic SQL, reaches: a KILL
/// (DYNAMIC_KILL), XA, sextant's schema. The text is read the way the
/// server would, its escapes and doubled quotes undone.
fn dynamic_reach(quoted: &[u8], mode: LexMode) -> Flags {
    reach_of(&crate::lexer::string_literal(quoted, mode))
}

/// What a statement's text, run as dynamic SQL, reaches (see
/// [`dynamic_reach`]); for text read from a server too.
pub fn reach_of(text: &[u8]) -> Flags {
    let c = classify(text);
    let mut out = c.flags & (Flags::XA | Flags::OWN_SCHEMA | Flags::INNER_KILL);
    if c.kind == Kind::Kill || c.flags.intersects(Flags::KILL | Flags::DYNAMIC_KILL) {
        out |= Flags::DYNAMIC_KILL;
    }
    if c.kind == Kind::Xa {
        out |= Flags::XA;
    }
    out
}

/// Whether a name token is sextant's own schema.
fn own_schema(t: &Token<'_>) -> bool {
    matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
        && t.text.eq_ignore_ascii_case(b"sextant")
}

/// Whether the name after `p1` is a schema's (not a table's or a
/// column's): `USE x`, `DATABASE x`, `SCHEMA x`, and `SHOW ... FROM x`.
fn names_schema(p1: Option<Token<'_>>, kind: Kind) -> bool {
    let Some(p) = p1.filter(|p| p.kind == TokenKind::Word) else {
        return false;
    };
    p.is_word("USE")
        || p.is_word("DATABASE")
        || p.is_word("SCHEMA")
        || (kind == Kind::Show && (p.is_word("FROM") || p.is_word("IN")))
}

/// A token of a statement inside a block: dynamic SQL there.
fn inner_token(
    t: &Token<'_>,
    inner: Kind,
    p1: Option<Token<'_>>,
    mode: LexMode,
    flags: &mut Flags,
) {
    let source = match inner {
        Kind::Prepare => p1.is_some_and(|p| p.is_word("FROM")),
        Kind::Execute => p1.is_some_and(|p| p.is_word("IMMEDIATE")),
        _ => false,
    };
    if !source {
        return;
    }
    match t.kind {
        TokenKind::Str => flags.insert(dynamic_reach(t.text, mode)),
        _ => flags.insert(Flags::INNER_DYNAMIC),
    }
}

/// Whether `text`, run as a statement, is a KILL.
pub fn is_kill(text: &[u8]) -> bool {
    Lexer::new(text)
        .find(|t| t.kind != TokenKind::Hint)
        .is_some_and(|t| t.is_word("KILL"))
}

/// The source of dynamic SQL that the statement does not spell out: what
/// follows `PREPARE name FROM` or `EXECUTE IMMEDIATE` (up to USING) when
/// it is not a string literal, e.g. `@v` or `CONCAT(...)`. Its value is
/// known only to the server connection.
pub fn dynamic_source(sql: &[u8], mode: LexMode) -> Option<&[u8]> {
    let base = sql.as_ptr() as usize;
    let toks: Vec<Token<'_>> = Lexer::with_mode(sql, mode)
        .filter(|t| t.kind != TokenKind::Hint)
        .collect();
    let start = match toks.as_slice() {
        [p, _, from, ..] if p.is_word("PREPARE") && from.is_word("FROM") => 3,
        [e, i, ..] if e.is_word("EXECUTE") && i.is_word("IMMEDIATE") => 2,
        _ => return None,
    };
    let mut depth = 0i32;
    let mut end = toks.len();
    for (i, t) in toks.iter().enumerate().skip(start) {
        if t.is_punct(b'(') {
            depth += 1;
        } else if t.is_punct(b')') {
            depth -= 1;
        } else if depth == 0 && (t.is_punct(b';') || t.is_word("USING")) {
            end = i;
            break;
        }
    }
    let src = toks.get(start..end)?;
    if src.is_empty() || matches!(src, [t] if t.kind == TokenKind::Str) {
        return None;
    }
    let from = src[0].text.as_ptr() as usize - base;
    let last = src[src.len() - 1];
    let to = last.text.as_ptr() as usize - base + last.text.len();
    // A quoted identifier's text is inside its quotes.
    let to = match last.kind {
        TokenKind::QuotedIdent => to + 1,
        _ => to,
    };
    sql.get(from..to.min(sql.len()))
}

fn function_call(name: &[u8], flags: &mut Flags) {
    let is = |k: &str| name.eq_ignore_ascii_case(k.as_bytes());
    match name.len() {
        6 if is("LASTVAL") || is("SETVAL") => flags.insert(Flags::SEQUENCE),
        7 if is("NEXTVAL") || is("LASTVAL") => flags.insert(Flags::SEQUENCE),
        8 if is("GET_LOCK") => flags.insert(Flags::NAMED_LOCK),
        // The proxy writes in the values it knows (session_info).
        9 if is("ROW_COUNT") => flags.insert(Flags::ROW_COUNT | Flags::SESSION_INFO),
        10 if is("FOUND_ROWS") => flags.insert(Flags::FOUND_ROWS | Flags::SESSION_INFO),
        13 if is("CONNECTION_ID") => flags.insert(Flags::SESSION_INFO),
        12 if is("RELEASE_LOCK") || is("IS_USED_LOCK") || is("IS_FREE_LOCK") => {
            flags.insert(Flags::NAMED_LOCK)
        }
        14 if is("LAST_INSERT_ID") => flags.insert(Flags::LAST_INSERT_ID),
        17 if is("RELEASE_ALL_LOCKS") => flags.insert(Flags::NAMED_LOCK),
        _ => {}
    }
}

/// The words of a read that make FOUND_ROWS() after it more than the
/// rows it sent (checked by length first: this runs on every word).
fn row_counting_word(t: &Token<'_>) -> Option<Flags> {
    match t.text.len() {
        5 if t.is_word("LIMIT") => Some(Flags::LIMIT),
        5 if t.is_word("UNION") => Some(Flags::UNSENT_ROWS),
        6 if t.is_word("OFFSET") || t.is_word("EXCEPT") => Some(Flags::UNSENT_ROWS),
        9 if t.is_word("INTERSECT") => Some(Flags::UNSENT_ROWS),
        _ => None,
    }
}

fn word_in_statement(
    t: &Token<'_>,
    p1: Option<Token<'_>>,
    p2: Option<Token<'_>>,
    seg: &mut Segment,
    flags: &mut Flags,
) {
    let p1w = |w: &str| p1.is_some_and(|p| p.is_word(w));
    let p2w = |w: &str| p2.is_some_and(|p| p.is_word(w));
    let second = seg.words == 2;
    match seg.kind {
        Kind::Select => {
            let for_update = (t.is_word("UPDATE") || t.is_word("SHARE")) && p1w("FOR");
            let lock_in_share_mode = t.is_word("MODE") && p1w("SHARE") && p2w("IN");
            if for_update || lock_in_share_mode {
                flags.insert(Flags::LOCKING_READ);
            } else if (t.is_word("OUTFILE") || t.is_word("DUMPFILE")) && p1w("INTO") {
                flags.insert(Flags::INTO_FILE);
            } else if t.is_word("SQL_CALC_FOUND_ROWS") {
                flags.insert(Flags::FOUND_ROWS);
            } else if let Some(f) = row_counting_word(t) {
                flags.insert(f);
            } else if (t.is_word("FOR") && p1w("VALUE") && (p2w("NEXT") || p2w("PREVIOUS")))
                || t.is_word("NEXTVAL")
            {
                flags.insert(Flags::SEQUENCE);
            } else if seg.with
                && seg.depth == 0
                && (t.is_word("UPDATE")
                    || t.is_word("DELETE")
                    || t.is_word("INSERT")
                    || t.is_word("REPLACE"))
            {
                seg.read_only = false;
            }
        }
        Kind::Ddl if second && t.is_word("TEMPORARY") => flags.insert(Flags::TEMP_TABLE),
        // RENAME TABLE renames views too; dropping a database drops its.
        Kind::Ddl
            if t.is_word("VIEW")
                || t.is_word("FUNCTION")
                || t.is_word("DATABASE")
                || t.is_word("SCHEMA")
                || (second && p1w("RENAME")) =>
        {
            flags.insert(Flags::CATALOGUE)
        }
        Kind::Lock if second && (t.is_word("TABLES") || t.is_word("TABLE")) => {
            flags.insert(Flags::LOCK_TABLES)
        }
        Kind::Unlock if second && (t.is_word("TABLES") || t.is_word("TABLE")) => {
            flags.insert(Flags::UNLOCK_TABLES)
        }
        Kind::Flush if t.is_word("LOCK") && p1w("READ") => flags.insert(Flags::LOCK_TABLES),
        Kind::Set if second && t.is_word("TRANSACTION") => flags.insert(Flags::NEXT_TRX),
        Kind::Begin if t.is_word("ONLY") && p1w("READ") => flags.insert(Flags::READ_ONLY_TRX),
        Kind::Insert | Kind::Update | Kind::Delete | Kind::Replace
            if t.is_word("FOR") && p1w("VALUE") && (p2w("NEXT") || p2w("PREVIOUS")) =>
        {
            flags.insert(Flags::SEQUENCE)
        }
        _ => {}
    }
}
