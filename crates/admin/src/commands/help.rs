//! `HELP`: every command, from the registry.

use super::{AdminCommand, Query, COMMANDS};
use crate::{Answer, Context, Table};

pub struct Help;

impl AdminCommand for Help {
    fn syntax(&self) -> &'static str {
        "HELP"
    }
    fn help(&self) -> &'static str {
        "this list"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        if !(q.is(&["HELP"]) || q.is(&["SHOW", "COMMANDS"])) {
            return None;
        }
        let rows = COMMANDS
            .iter()
            .map(|c| vec![Some(c.syntax().to_string()), Some(c.help().to_string())])
            .collect();
        Some(Answer::Table(Table {
            columns: vec!["command".into(), "what it does".into()],
            rows,
        }))
    }
}
