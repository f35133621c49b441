//! `SHOW SESSIONS` (alias `SHOW PROCESSLIST`): the client sessions.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};

pub struct ShowSessions;

impl AdminCommand for ShowSessions {
    fn syntax(&self) -> &'static str {
        "SHOW SESSIONS"
    }
    fn help(&self) -> &'static str {
        "client sessions: user, client, group, idle or running and on which server thread"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        (q.is(&["SHOW", "SESSIONS"]) || q.is(&["SHOW", "PROCESSLIST"]))
            .then(|| Answer::Table(sessions(ctx)))
    }
}

fn sessions(ctx: &Context<'_>) -> Table {
    let rows = (ctx.sessions)()
        .into_iter()
        .map(|s| {
            let (state, server, thread) = match s.running {
                Some((server, thread)) => ("running", Some(server), Some(thread.to_string())),
                None => ("idle", None, None),
            };
            vec![
                Some(s.id.to_string()),
                Some(s.user),
                Some(s.client),
                Some(s.group),
                Some(state.to_string()),
                server,
                thread,
            ]
        })
        .collect();
    Table {
        columns: [
            "id",
            "user",
            "client",
            "group",
            "state",
            "server",
            "server_thread",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }
}
