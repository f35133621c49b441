//! `KILL [QUERY | CONNECTION] <session id> [AS '<user>']`: carried out by
//! the proxy. `AS` is how another instance of a fleet forwards a client's
//! KILL to the instance holding the session: the session must be that
//! user's own, or the user must have `connection_admin`.

use super::{AdminCommand, Query};
use crate::{Answer, Context};

pub struct Kill;

impl AdminCommand for Kill {
    fn syntax(&self) -> &'static str {
        "KILL [QUERY] <session id> [AS '<user>']"
    }
    fn help(&self) -> &'static str {
        "ends a session (its transaction rolls back), or with QUERY only its running statement; a session of another instance of the fleet is ended there; AS: only if that user may (its own session, or connection_admin)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        if q.words.first().map(String::as_str) != Some("KILL") {
            return None;
        }
        let w: Vec<&str> = q.words.iter().map(String::as_str).collect();
        let (words, as_user) = match w.iter().position(|x| *x == "AS") {
            Some(i) => match quoted_user(q.sql) {
                Some(u) => (&w[1..i], Some(u)),
                None => return Some(Answer::Error(self.syntax().into())),
            },
            None => (&w[1..], None),
        };
        Some(kill(words, as_user))
    }
}

/// The `'<user>'` after ` AS ` (as written: user names are case-sensitive).
fn quoted_user(sql: &str) -> Option<String> {
    let at = sql.to_ascii_uppercase().rfind(" AS ")?;
    let rest = sql[at + 4..].trim().trim_end_matches(';').trim();
    let inner = rest.strip_prefix('\'')?.strip_suffix('\'')?;
    (!inner.is_empty() && !inner.contains('\'')).then(|| inner.to_string())
}

/// `KILL [QUERY | CONNECTION] <session id>` (the words after KILL).
fn kill(words: &[&str], as_user: Option<String>) -> Answer {
    let (query_only, id) = match words {
        ["QUERY", id] => (true, id),
        ["CONNECTION", id] | [id] => (false, id),
        _ => return Answer::Error("KILL [QUERY | CONNECTION] <session id> [AS '<user>']".into()),
    };
    match id.parse() {
        Ok(id) => Answer::Kill {
            id,
            query_only,
            as_user,
        },
        Err(_) => Answer::Error(format!(
            "{id:?} is not a session id (SHOW SESSIONS lists them)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_kill_names_its_user_as_written() {
        assert_eq!(quoted_user("KILL QUERY 7 AS 'App_1'"), Some("App_1".into()));
        assert_eq!(quoted_user("kill 7 as 'x';"), Some("x".into()));
        assert_eq!(quoted_user("KILL 7 AS x"), None);
        assert_eq!(quoted_user("KILL 7 AS ''"), None);
    }
}
