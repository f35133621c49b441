//! Just enough SQL to route a statement: a one-pass lexer that skips strings
//! and comments, pulls out `/*# key=value */` hints, and a classifier that
//! says whether a statement is a plain read, a write, a transaction control
//! statement, or something that ties the session to one server connection.
//!
//! Nothing here allocates; a classification borrows from the statement text.

mod builtin;
mod classify;
mod hints;
mod lexer;

pub use classify::{classify, Classification, Flags, Kind};
pub use hints::{Hints, MAX_HINTS};
pub use lexer::{LexMode, Lexer, Token, TokenKind};
