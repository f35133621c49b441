//! `[monitor]`: how servers are checked.

use crate::check::Checker;
use crate::is_native_hash;
use serde::Deserialize;

/// The topology monitor: one check per server every interval.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Monitor {
    #[serde(default = "crate::yes")]
    pub enabled: bool,
    #[serde(default = "default_monitor_interval_ms")]
    pub interval_ms: u64,
    /// Account the monitor logs in with (default: the first user's server
    /// account). It needs REPLICATION CLIENT (or SLAVE MONITOR) for
    /// replication status, and to write the heartbeat: CREATE and INSERT on
    /// the `sextant` database of the primary.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default, deserialize_with = "crate::secrets::optional_secret")]
    pub password: Option<String>,
    /// Measure lag with a heartbeat row written on the primary every
    /// interval (millisecond precision); without it, Seconds_Behind_Master.
    #[serde(default = "crate::yes")]
    pub heartbeat: bool,
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor {
            enabled: true,
            interval_ms: default_monitor_interval_ms(),
            user: None,
            password: None,
            heartbeat: true,
        }
    }
}

pub(crate) fn default_monitor_interval_ms() -> u64 {
    500
}

impl Monitor {
    pub(crate) fn check(&self, c: &mut Checker) {
        if self.password.as_deref().is_some_and(is_native_hash) {
            c.err(
                "monitor",
                "password",
                "the monitor logs in to the servers: give its password, not a hash".into(),
            );
        }
        if self.interval_ms < 50 {
            c.err("monitor", "interval_ms", "must be at least 50".into());
        }
        if self.user.is_some() != self.password.is_some() {
            c.err(
                "monitor",
                "user",
                "give both user and password, or neither".into(),
            );
        }
    }
}
