//! `[log]`: level and format.

use crate::check::Checker;
use serde::Deserialize;

/// `[log]`: what sextant logs and how. RUST_LOG, when set, overrides
/// `level`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// "text" (colours only on a terminal) or "json" (one object a line).
    #[serde(default)]
    pub format: LogFormat,
    /// Levels, as RUST_LOG takes them: "info", or per module, e.g.
    /// "info,sextant_monitor=debug". A reload applies a change.
    #[serde(default = "default_log_level")]
    pub level: String,
    /// Statements that take longer than this many milliseconds are
    /// logged (target `sextant::slow`, level warn) with their digest
    /// (values replaced by `?`), user, database and time. 0: off.
    #[serde(default)]
    pub slow_query_ms: u64,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            format: LogFormat::Text,
            level: default_log_level(),
            slow_query_ms: 0,
        }
    }
}

pub(crate) fn default_log_level() -> String {
    "info".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A `[log] level` is a list of `level` or `target=level` directives
/// (RUST_LOG's form, without its span filters).
pub(crate) fn check_log_level(v: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for d in v.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (target, level) = match d.split_once('=') {
            Some((t, l)) => (Some(t.trim()), l.trim()),
            None => (None, d),
        };
        let target_ok = target.is_none_or(|t| {
            !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        });
        if !target_ok || !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "{d:?}: give a level (off, error, warn, info, debug, trace) or module=level, separated by commas, e.g. \"info,sextant_monitor=debug\""
            ));
        }
    }
    Ok(())
}

impl Log {
    pub(crate) fn check(&self, c: &mut Checker) {
        if let Err(m) = check_log_level(&self.level) {
            c.err("log", "level", m);
        }
    }
}
