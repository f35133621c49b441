//! Taking a server out of rotation and back: `SET BACKEND '<addr>' STATE
//! online | maintenance | offline`, and the older `SET MAINTENANCE ON|OFF
//! '<addr>'`.
//!
//! maintenance: the server takes nothing new (reads go elsewhere; on a
//! primary, writes wait up to the group's primary_wait_ms for it or for
//! another primary, then fail with 9004 saying why); statements running
//! and transactions open on it finish. offline: the same, and its idle
//! connections are closed at once. online: back in rotation.

use super::{AdminCommand, Query};
use crate::{Answer, Context};

pub struct SetBackendState;

impl AdminCommand for SetBackendState {
    fn syntax(&self) -> &'static str {
        "SET BACKEND '<addr>' STATE online | maintenance | offline"
    }
    fn help(&self) -> &'static str {
        "maintenance: takes nothing new, running statements and open transactions finish (writes to a primary in maintenance wait primary_wait_ms, then fail); offline: also closes its idle connections; online: back in rotation"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        let rest = q.after(&["SET", "BACKEND"])?;
        let (addr, state) = match rest
            .trim()
            .trim_end_matches(';')
            .rsplit_once(char::is_whitespace)
        {
            Some((head, state)) => match head.trim().rsplit_once(char::is_whitespace) {
                Some((addr, kw)) if kw.eq_ignore_ascii_case("STATE") => (addr.trim(), state),
                _ => return Some(Answer::Error(self.syntax().to_string())),
            },
            None => return Some(Answer::Error(self.syntax().to_string())),
        };
        let addr = addr.trim_matches(|c| c == '\'' || c == '"');
        let state = state.to_ascii_lowercase();
        if !["online", "maintenance", "offline"].contains(&state.as_str()) {
            return Some(Answer::Error(format!(
                "state {state:?}: give online, maintenance or offline"
            )));
        }
        Some(set_state(ctx, addr, &state))
    }
}

pub struct SetMaintenance;

impl AdminCommand for SetMaintenance {
    fn syntax(&self) -> &'static str {
        "SET MAINTENANCE ON | OFF '<addr>'"
    }
    fn help(&self) -> &'static str {
        "the same as SET BACKEND ... STATE maintenance | online"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        for (verb, state) in [("ON", "maintenance"), ("OFF", "online")] {
            if let Some(rest) = q.after(&["SET", "MAINTENANCE", verb]) {
                let addr = rest
                    .trim()
                    .trim_end_matches(';')
                    .trim()
                    .trim_matches(|c| c == '\'' || c == '"');
                return Some(set_state(ctx, addr, state));
            }
        }
        None
    }
}

fn set_state(ctx: &Context<'_>, addr: &str, state: &str) -> Answer {
    if ctx.pool.servers().any(|s| &*s.addr == addr) {
        Answer::SetBackend {
            addr: addr.to_string(),
            state: state.to_string(),
        }
    } else {
        Answer::Error(format!("no server {addr:?}; SHOW BACKENDS lists them"))
    }
}

/// Puts every server at `addr` (it may be in several groups) in `state`:
/// `online`, `maintenance` or `offline`. False when the pool has none.
pub fn apply(pool: &sextant_backend::Pool, addr: &str, state: &str) -> bool {
    let mut found = false;
    for s in pool.servers().filter(|s| &*s.addr == addr) {
        s.health.set_maintenance(state != "online");
        if state == "offline" {
            s.close_idle();
        }
        found = true;
    }
    found
}
