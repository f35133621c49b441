//! Compound statements, as the server's grammar nests them: a stored
//! program's body (CREATE PROCEDURE / FUNCTION / TRIGGER / EVENT /
//! PACKAGE) and MariaDB's compound statements outside stored programs
//! (`BEGIN NOT ATOMIC`, IF, CASE, LOOP, WHILE, REPEAT) are one statement,
//! whatever semicolons they hold. A packet is split into statements only
//! at a `;` outside every block; and the statements inside a body are
//! found by where they start, so that what they reach (XA, KILL) is seen
//! without being taken for a statement of the packet's own.
//!
//! Read token by token alongside the classifier: no allocation, a few
//! comparisons per word.

use crate::lexer::{Token, TokenKind};

/// The deepest nesting tracked by kind; deeper blocks still count.
const KINDS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// BEGIN ... END (and a stored program's declarations, `AS` / `IS`
    /// in Oracle mode, which its BEGIN ... END closes).
    Begin,
    Declarations,
    If,
    /// CASE as a statement (ends with END CASE): its THEN and ELSE start
    /// statements.
    CaseStatement,
    /// CASE as an expression (ends with END): its THEN and ELSE do not.
    CaseExpression,
    Loop,
    While,
    Repeat,
}

/// Where a stored program's header stands, before its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// Not a CREATE of a stored program (or its body has started).
    None,
    /// CREATE ...: looking for PROCEDURE, FUNCTION, TRIGGER, EVENT.
    Create,
    /// PROCEDURE / FUNCTION name, before its parameter list.
    Routine { function: bool },
    /// After the parameters: characteristics, then the body (a
    /// function's RETURNS type first).
    Characteristics { function: bool, returns: bool },
    /// TRIGGER ...: the body follows FOR EACH ROW [FOLLOWS|PRECEDES t].
    Trigger { row: bool, skip: bool },
    /// EVENT ...: the body follows DO.
    Event,
}

/// What the token just read was, for the word after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Nothing yet: the packet's (or, after a `;` outside blocks, the
    /// next top-level statement's) first word follows.
    Top,
    /// A statement inside a block or body starts with the next word.
    Start,
    Other,
}

/// A word, as the tracker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Part of whatever statement it is in.
    Plain,
    /// The first word of a statement inside a compound statement or a
    /// stored program's body: not one of the packet's statements.
    Inner,
}

pub(crate) struct Blocks {
    kinds: [Block; KINDS],
    depth: usize,
    /// Paren depth inside the header of a stored program.
    parens: u32,
    header: Header,
    prev: Prev,
    /// The previous token was END closing a block: IF, CASE, LOOP, WHILE
    /// or REPEAT after it closes, opens nothing.
    after_end: bool,
    /// A top-level BEGIN: a block if NOT ATOMIC follows, else a
    /// transaction.
    pending_begin: bool,
    /// NOT after a top-level BEGIN: ATOMIC follows, then the block's
    /// first statement.
    expect_atomic: bool,
    /// The previous token was the word CHARACTER (`CHARACTER SET` in a
    /// function's RETURNS type is no SET statement).
    after_character: bool,
    /// Whether any block opened in this packet.
    pub(crate) compound: bool,
}

impl Blocks {
    pub(crate) fn new() -> Self {
        Blocks {
            kinds: [Block::Begin; KINDS],
            depth: 0,
            parens: 0,
            header: Header::None,
            prev: Prev::Top,
            after_end: false,
            pending_begin: false,
            expect_atomic: false,
            after_character: false,
            compound: false,
        }
    }

    /// Whether a `;` here ends a statement of the packet.
    #[inline]
    pub(crate) fn outside(&self) -> bool {
        self.depth == 0
    }

    /// Whether the tokens read so far are inside a compound statement or
    /// a stored program's header or body.
    #[inline]
    pub(crate) fn within(&self) -> bool {
        self.depth > 0 || self.header != Header::None
    }

    fn top(&self) -> Option<Block> {
        match self.depth {
            0 => None,
            d => Some(self.kinds[(d - 1).min(KINDS - 1)]),
        }
    }

    fn push(&mut self, b: Block) {
        if self.depth < KINDS {
            self.kinds[self.depth] = b;
        }
        self.depth += 1;
        self.compound |= b != Block::CaseExpression;
        self.header = Header::None;
    }

    /// Reads one token (hints excluded); for a word, whether it starts a
    /// statement inside a block.
    pub(crate) fn token(&mut self, t: &Token<'_>) -> Seen {
        match t.kind {
            TokenKind::Word => self.word(t),
            TokenKind::Punct => {
                self.punct(t.text[0]);
                Seen::Plain
            }
            _ => {
                self.after_end = false;
                self.pending_begin = false;
                self.after_character = false;
                // A COMMENT's string in a header: the body may follow.
                if !matches!(self.header, Header::Characteristics { .. }) {
                    self.prev = Prev::Other;
                }
                Seen::Plain
            }
        }
    }

    fn punct(&mut self, c: u8) {
        self.after_end = false;
        self.pending_begin = false;
        self.after_character = false;
        match c {
            b';' if self.depth == 0 => {
                self.header = Header::None;
                self.parens = 0;
                self.prev = Prev::Top;
            }
            b';' => self.prev = Prev::Start,
            // A label: `name: LOOP`.
            b':' => {
                if self.prev != Prev::Top {
                    self.prev = Prev::Start;
                }
            }
            b'(' => {
                self.parens += 1;
                if let Header::Routine { function } = self.header {
                    if self.parens == 1 {
                        self.header = Header::Characteristics {
                            function,
                            returns: false,
                        };
                        // The parameters are read inside the parens.
                        self.parens = 1;
                    }
                }
                self.prev = Prev::Other;
            }
            b')' => {
                self.parens = self.parens.saturating_sub(1);
                self.prev = match self.header {
                    Header::Characteristics {
                        function: false, ..
                    } if self.parens == 0 => Prev::Start,
                    _ => Prev::Other,
                };
            }
            _ => self.prev = Prev::Other,
        }
    }

    fn word(&mut self, t: &Token<'_>) -> Seen {
        let w = t.text;
        let is = |k: &str| w.eq_ignore_ascii_case(k.as_bytes());
        let after_end = std::mem::take(&mut self.after_end);
        let after_character = std::mem::take(&mut self.after_character);
        if std::mem::take(&mut self.pending_begin) && is("NOT") {
            self.push(Block::Begin);
            self.expect_atomic = true;
            self.prev = Prev::Other;
            return Seen::Plain;
        }
        if std::mem::take(&mut self.expect_atomic) && is("ATOMIC") {
            self.prev = Prev::Start;
            return Seen::Plain;
        }
        if after_end && (is("IF") || is("CASE") || is("LOOP") || is("WHILE") || is("REPEAT")) {
            self.prev = Prev::Other;
            return Seen::Plain;
        }
        if self.header != Header::None {
            return self.header_word(t, after_character);
        }
        let at = self.prev;
        self.prev = Prev::Other;
        let start = match at {
            Prev::Top => {
                if is("CREATE") {
                    self.header = Header::Create;
                    return Seen::Plain;
                }
                if is("BEGIN") {
                    self.pending_begin = true;
                    return Seen::Plain;
                }
                true
            }
            Prev::Start => true,
            Prev::Other => false,
        };
        // A block's own words (ELSE, UNTIL, ...) start no statement.
        let continues = is("ELSE") || is("ELSEIF") || is("UNTIL") || is("WHEN");
        let seen = match (start, at) {
            (true, Prev::Start) if !continues => Seen::Inner,
            _ => Seen::Plain,
        };
        if is("END") && self.depth > 0 {
            self.depth -= 1;
            self.after_end = true;
            return Seen::Plain;
        }
        // Inside a block, BEGIN opens one wherever it stands (a handler's
        // body follows its condition).
        if is("BEGIN") && (start || self.depth > 0) {
            // Declarations end where their body's BEGIN ... END starts.
            if self.top() == Some(Block::Declarations) {
                self.depth -= 1;
            }
            self.push(Block::Begin);
            self.prev = Prev::Start;
            return seen;
        }
        if is("CASE") {
            self.push(match start {
                true => Block::CaseStatement,
                false => Block::CaseExpression,
            });
            return seen;
        }
        if start {
            let opened = match w.len() {
                2 if is("IF") => Some(Block::If),
                4 if is("LOOP") => Some(Block::Loop),
                5 if is("WHILE") => Some(Block::While),
                6 if is("REPEAT") => Some(Block::Repeat),
                _ => None,
            };
            if let Some(b) = opened {
                self.push(b);
                if matches!(b, Block::Loop | Block::Repeat) {
                    self.prev = Prev::Start;
                }
                return seen;
            }
        }
        if self.depth > 0 {
            // THEN and ELSE of IF and of a CASE statement, and a WHILE's
            // DO, start statements; ELSEIF's condition follows it.
            let starts = match self.top() {
                Some(Block::If | Block::CaseStatement) => is("THEN") || is("ELSE"),
                Some(Block::While) => is("DO"),
                _ => false,
            };
            if starts {
                self.prev = Prev::Start;
            }
        }
        seen
    }

    /// A word in a stored program's header: the body's first word is a
    /// statement inside it.
    fn header_word(&mut self, t: &Token<'_>, after_character: bool) -> Seen {
        let w = t.text;
        let is = |k: &str| w.eq_ignore_ascii_case(k.as_bytes());
        self.prev = Prev::Other;
        match self.header {
            Header::Create => {
                self.header = match w.len() {
                    5 if is("EVENT") => Header::Event,
                    7 if is("TRIGGER") => Header::Trigger {
                        row: false,
                        skip: false,
                    },
                    7 if is("PACKAGE") => Header::Routine { function: false },
                    8 if is("FUNCTION") => Header::Routine { function: true },
                    9 if is("PROCEDURE") => Header::Routine { function: false },
                    _ if is("TABLE")
                        || is("VIEW")
                        || is("INDEX")
                        || is("DATABASE")
                        || is("SCHEMA")
                        || is("USER")
                        || is("ROLE")
                        || is("SEQUENCE")
                        || is("SERVER")
                        || is("TEMPORARY")
                        || is("UNIQUE")
                        || is("FULLTEXT")
                        || is("SPATIAL") =>
                    {
                        Header::None
                    }
                    _ => Header::Create,
                };
                Seen::Plain
            }
            // A function-like routine without parens (Oracle mode's
            // `CREATE PROCEDURE p AS ...`): AS or IS opens its body.
            Header::Routine { .. } if self.parens == 0 && (is("AS") || is("IS")) => {
                self.push(Block::Declarations);
                self.prev = Prev::Start;
                Seen::Plain
            }
            Header::Routine { .. } => Seen::Plain,
            Header::Characteristics { .. } if self.parens > 0 => Seen::Plain,
            Header::Characteristics { function, returns } => {
                if function && !returns {
                    if is("RETURNS") {
                        self.header = Header::Characteristics {
                            function,
                            returns: true,
                        };
                    }
                    return Seen::Plain;
                }
                if is("AS") || is("IS") {
                    self.push(Block::Declarations);
                    self.prev = Prev::Start;
                    return Seen::Plain;
                }
                let body = match function {
                    // The RETURNS type's words (any name, CHARACTER SET
                    // x, COLLATE y) come before the body; the body is
                    // the first word that starts a statement.
                    true => statement_word(w) && !(is("SET") && after_character),
                    false => !characteristic(w),
                };
                self.after_character = is("CHARACTER");
                if body {
                    self.header = Header::None;
                    return self.body_start(t);
                }
                Seen::Plain
            }
            Header::Trigger { row, skip } => {
                if skip {
                    // The trigger named by FOLLOWS / PRECEDES.
                    self.header = Header::Trigger {
                        row: true,
                        skip: false,
                    };
                    return Seen::Plain;
                }
                if !row {
                    if is("ROW") {
                        self.header = Header::Trigger {
                            row: true,
                            skip: false,
                        };
                    }
                    return Seen::Plain;
                }
                if is("FOLLOWS") || is("PRECEDES") {
                    self.header = Header::Trigger {
                        row: true,
                        skip: true,
                    };
                    return Seen::Plain;
                }
                self.header = Header::None;
                self.body_start(t)
            }
            Header::Event => {
                if self.parens == 0 && is("DO") {
                    self.header = Header::None;
                    self.prev = Prev::Start;
                }
                Seen::Plain
            }
            Header::None => Seen::Plain,
        }
    }

    /// The first word of a stored program's body.
    fn body_start(&mut self, t: &Token<'_>) -> Seen {
        self.prev = Prev::Start;
        self.parens = 0;
        self.word(t)
    }
}

/// Words of a procedure's characteristics (and its COMMENT's keyword):
/// the first other word starts its body.
fn characteristic(w: &[u8]) -> bool {
    const WORDS: [&str; 15] = [
        "COMMENT",
        "LANGUAGE",
        "SQL",
        "NOT",
        "DETERMINISTIC",
        "CONTAINS",
        "NO",
        "READS",
        "MODIFIES",
        "DATA",
        "SECURITY",
        "DEFINER",
        "INVOKER",
        "AGGREGATE",
        "SPECIFIC",
    ];
    WORDS.iter().any(|k| w.eq_ignore_ascii_case(k.as_bytes()))
}

/// Words that start a statement in a function's body (which cannot be
/// a type's or a characteristic's).
fn statement_word(w: &[u8]) -> bool {
    const WORDS: [&str; 26] = [
        "RETURN", "BEGIN", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "SELECT", "INSERT", "UPDATE",
        "DELETE", "REPLACE", "SET", "DECLARE", "CALL", "DO", "KILL", "XA", "PREPARE", "EXECUTE",
        "SIGNAL", "RESIGNAL", "LEAVE", "ITERATE", "WITH", "VALUES",
    ];
    WORDS.iter().any(|k| w.eq_ignore_ascii_case(k.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::Lexer;

    /// The packet's statements (as split at `;` outside blocks) and the
    /// first words of the statements found inside blocks.
    fn read(sql: &str) -> (Vec<String>, Vec<String>) {
        let mut b = Blocks::new();
        let mut stmts = vec![String::new()];
        let mut inner = Vec::new();
        for t in Lexer::new(sql.as_bytes()) {
            if t.is_punct(b';') && b.outside() {
                b.token(&t);
                stmts.push(String::new());
                continue;
            }
            if b.token(&t) == Seen::Inner {
                inner.push(String::from_utf8_lossy(t.text).to_uppercase());
            }
            let s = stmts.last_mut().unwrap();
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&String::from_utf8_lossy(t.text));
        }
        stmts.retain(|s| !s.is_empty());
        (stmts, inner)
    }

    #[rustfmt::skip]
    #[test]
    fn statements_and_their_inner_statements() {
        let cases: &[(&str, usize, &[&str])] = &[
            ("SELECT 1; SELECT 2", 2, &[]),
            ("BEGIN; SELECT 1; COMMIT", 3, &[]),
            ("BEGIN WORK; KILL 5", 2, &[]),
            ("CREATE PROCEDURE p() BEGIN SELECT 1; KILL 5; END", 1, &["BEGIN", "SELECT", "KILL"]),
            ("CREATE PROCEDURE p() BEGIN SELECT 1; KILL 5; END; KILL 6", 2, &["BEGIN", "SELECT", "KILL"]),
            ("CREATE DEFINER=`root`@`%` PROCEDURE p(IN a INT) COMMENT 'x' MODIFIES SQL DATA BEGIN IF a THEN XA RECOVER; ELSE SELECT 2; END IF; END", 1, &["BEGIN", "IF", "XA", "SELECT"]),
            ("CREATE PROCEDURE p() BEGIN SET @s = 'SELECT 1'; PREPARE st FROM @s; EXECUTE st; END", 1, &["BEGIN", "SET", "PREPARE", "EXECUTE"]),
            ("CREATE PROCEDURE p() SELECT IF(1,2,3); SELECT 6", 2, &["SELECT"]),
            ("CREATE PROCEDURE p() KILL 5", 1, &["KILL"]),
            ("CREATE FUNCTION f() RETURNS INT RETURN IF(1,2,3); SELECT 1", 2, &["RETURN"]),
            ("CREATE FUNCTION f(a INT) RETURNS VARCHAR(10) CHARACTER SET utf8 DETERMINISTIC BEGIN DECLARE x INT; SET x = CASE WHEN a THEN 1 ELSE 2 END; RETURN x; END", 1, &["BEGIN", "DECLARE", "SET", "RETURN"]),
            ("CREATE TRIGGER t BEFORE INSERT ON x FOR EACH ROW FOLLOWS t0 BEGIN XA RECOVER; END", 1, &["BEGIN", "XA"]),
            ("CREATE TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET NEW.a = 1; KILL 3", 2, &["SET"]),
            ("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO BEGIN DELETE FROM t; XA RECOVER; END", 1, &["BEGIN", "DELETE", "XA"]),
            ("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO KILL 4; SELECT 1", 2, &["KILL"]),
            ("BEGIN NOT ATOMIC SELECT 1; XA RECOVER; END", 1, &["SELECT", "XA"]),
            ("IF 1 THEN SELECT 1; KILL 2; ELSEIF 2 THEN SELECT 3; END IF; SELECT 4", 2, &["SELECT", "KILL", "SELECT"]),
            ("CASE 1 WHEN 1 THEN KILL 5; END CASE", 1, &["KILL"]),
            ("SELECT CASE WHEN a THEN 1 ELSE 2 END FROM t; KILL 1", 2, &[]),
            ("CREATE PROCEDURE p() BEGIN lbl: LOOP SELECT 1; LEAVE lbl; END LOOP lbl; WHILE 1 DO KILL 1; END WHILE; REPEAT XA RECOVER; UNTIL 1 END REPEAT; END", 1, &["BEGIN", "LBL", "LOOP", "SELECT", "LEAVE", "WHILE", "KILL", "REPEAT", "XA"]),
            ("CREATE PROCEDURE p() BEGIN DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN KILL 1; END; DROP TABLE IF EXISTS t; END", 1, &["BEGIN", "DECLARE", "KILL", "DROP"]),
            ("CREATE PROCEDURE p AS x INT; BEGIN KILL 1; END; SELECT 2", 2, &["X", "BEGIN", "KILL"]),
            ("CREATE TABLE event (begin INT); KILL 5", 2, &[]),
            ("CREATE OR REPLACE PROCEDURE IF NOT EXISTS p() BEGIN END; SELECT 1", 2, &["BEGIN"]),
        ];
        let mut wrong = Vec::new();
        for (sql, n, inner) in cases {
            let (stmts, found) = read(sql);
            if stmts.len() != *n || found != *inner {
                wrong.push(format!("{sql}\n  {stmts:?}\n  {found:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
