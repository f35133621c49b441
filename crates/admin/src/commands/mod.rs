//! The admin port's commands, one per file, each behind [`AdminCommand`]
//! (pgdog's admin is the model): a command recognises its own text and
//! answers from the [`Context`](crate::Context), or asks the proxy to act
//! (an [`Answer`](crate::Answer) naming the action). `HELP` lists them from
//! the same registry, so a new command is one file and one line here.

mod backends;
mod client;
mod config;
pub mod digests;
mod explain_route;
pub mod fleet;
mod groups;
mod help;
mod kill;
pub mod maintenance;
mod reload;
mod routing;
mod sessions;
mod shard_schema;
mod stats;
mod status;
mod xa;

pub use shard_schema::schema_diff;

use crate::{Answer, Context};

/// One admin command.
pub trait AdminCommand: Sync {
    /// How it is written, for HELP.
    fn syntax(&self) -> &'static str;
    /// What it does, for HELP.
    fn help(&self) -> &'static str;
    /// Its answer, when `q` is this command.
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer>;
}

/// A command's text, and its words upper-cased (`;` and spacing dropped).
pub struct Query<'a> {
    pub sql: &'a str,
    pub words: Vec<String>,
}

impl<'a> Query<'a> {
    pub fn new(sql: &'a str) -> Query<'a> {
        let words = sql
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_uppercase())
            .collect();
        Query { sql, words }
    }

    /// Whether the words are exactly `w`.
    pub fn is(&self, w: &[&str]) -> bool {
        self.words.len() == w.len() && self.words.iter().zip(w).all(|(a, b)| a == b)
    }

    /// The text after the leading words `w` (case-insensitive).
    pub fn after(&self, w: &[&str]) -> Option<&'a str> {
        strip_words(self.sql, w)
    }
}

/// Every command, most specific first (the client-library answers last).
pub static COMMANDS: &[&dyn AdminCommand] = &[
    &backends::ShowBackends,
    &groups::ShowGroups,
    &groups::Switchover,
    &stats::ShowStats,
    &status::ShowStatus,
    &sessions::ShowSessions,
    &kill::Kill,
    &maintenance::SetBackendState,
    &maintenance::SetMaintenance,
    &routing::SetRouting,
    &routing::ShowVariables,
    &config::ShowConfig,
    &digests::ShowDigests,
    &digests::ResetDigests,
    &reload::ReloadConfig,
    &explain_route::ExplainRoute,
    &shard_schema::ShardSchemaDiff,
    &xa::ShowXa,
    &xa::ShowAccounts,
    &xa::XaResolve,
    &fleet::ShowFleet,
    &fleet::ShowFleetSessions,
    &fleet::PushConfig,
    &help::Help,
    &client::Client,
];

/// `text` without its leading `words` (case-insensitive, any spacing).
pub(crate) fn strip_words<'s>(text: &'s str, words: &[&str]) -> Option<&'s str> {
    let mut rest = text.trim_start();
    for w in words {
        let head = rest.get(..w.len())?;
        if !head.eq_ignore_ascii_case(w) {
            return None;
        }
        rest = &rest[w.len()..];
        if !rest.starts_with(char::is_whitespace) && !rest.is_empty() {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(rest)
}
