//! Just enough SQL to route a statement: a one-pass lexer that skips strings
//! and comments, pulls out `/*# key=value */` hints, and a classifier that
//! says whether a statement is a plain read, a write, a transaction control
//! statement, or something that ties the session to one server connection.
//!
//! Classifying allocates nothing; a classification borrows from the
//! statement text. A [`Catalogue`] (built off the hot path) adds what the
//! server knows: its flavor, its stored functions and views.

mod blocks;
pub mod builtin;
mod catalogue;
mod classify;
pub mod digest;
mod hints;
mod lexer;
pub mod session_info;
pub mod set_literals;
pub mod shape;
pub mod xa;

pub use catalogue::{Catalogue, ServerKind};
pub use classify::{
    classify, classify_in, dynamic_source, is_kill, kill_spans, reach_of, statement_spans,
    Classification, Flags, Kind,
};
pub use hints::{Hints, MAX_HINTS};
pub use lexer::{string_literal, LexMode, Lexer, Multibyte, ServerVersion, Token, TokenKind};
