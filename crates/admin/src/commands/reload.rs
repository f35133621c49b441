//! `RELOAD CONFIG`: the proxy reads its config file again.

use super::{AdminCommand, Query};
use crate::{Answer, Context};

pub struct ReloadConfig;

impl AdminCommand for ReloadConfig {
    fn syntax(&self) -> &'static str {
        "RELOAD CONFIG"
    }
    fn help(&self) -> &'static str {
        "reads the config file again and applies it (refused whole, with its problems, if invalid)"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["RELOAD", "CONFIG"]).then_some(Answer::Reload)
    }
}
