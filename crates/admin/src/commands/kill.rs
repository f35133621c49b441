//! `KILL [QUERY | CONNECTION] <session id>`: carried out by the proxy.

use super::{AdminCommand, Query};
use crate::{Answer, Context};

pub struct Kill;

impl AdminCommand for Kill {
    fn syntax(&self) -> &'static str {
        "KILL [QUERY] <session id>"
    }
    fn help(&self) -> &'static str {
        "ends a session (its transaction rolls back), or with QUERY only its running statement"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        let w: Vec<&str> = q.words.iter().map(String::as_str).collect();
        match w.as_slice() {
            ["KILL", rest @ ..] => Some(kill(rest)),
            _ => None,
        }
    }
}

/// `KILL [QUERY | CONNECTION] <session id>` (the words after KILL).
fn kill(words: &[&str]) -> Answer {
    let (query_only, id) = match words {
        ["QUERY", id] => (true, id),
        ["CONNECTION", id] | [id] => (false, id),
        _ => return Answer::Error("KILL [QUERY | CONNECTION] <session id>".into()),
    };
    match id.parse() {
        Ok(id) => Answer::Kill { id, query_only },
        Err(_) => Answer::Error(format!(
            "{id:?} is not a session id (SHOW SESSIONS lists them)"
        )),
    }
}
