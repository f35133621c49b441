//! `[xa]`: the coordinator of transactions over several groups.

use crate::check::Checker;
use serde::Deserialize;

/// `[xa]`: the coordinator of transactions that write to several groups
/// of a sharded layout.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Xa {
    /// The directory of the decision log (made if missing). A commit
    /// decision is synced there before any branch commits; recovery after
    /// a crash reads it, so it must outlive the process.
    #[serde(default = "default_xa_log_dir")]
    pub log_dir: String,
    /// Names this sextant in its transactions' ids, so that its recovery
    /// resolves only its own: 1-32 of `A-Z a-z 0-9 _ . -`, distinct per
    /// instance sharing the servers. Default: made once at random and
    /// kept in `log_dir`/instance-id.
    #[serde(default)]
    pub instance_id: Option<String>,
    /// How often recovery asks every group's primary for prepared branches
    /// (also at start, and at once after a branch's commit failed).
    #[serde(default = "default_recover_interval_ms")]
    pub recover_interval_ms: u64,
    /// The account sextant's coordinator and recovery log in to the
    /// groups' primaries with: it writes and reads the decision rows
    /// (CREATE, INSERT, SELECT, DELETE on the `sextant` schema) and
    /// settles prepared branches. No application account needs any
    /// privilege on `sextant`. Default: `[monitor] user`, else the first
    /// user's server account.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default, deserialize_with = "crate::secrets::optional_secret")]
    pub password: Option<String>,
}

impl Default for Xa {
    fn default() -> Xa {
        Xa {
            log_dir: default_xa_log_dir(),
            instance_id: None,
            recover_interval_ms: default_recover_interval_ms(),
            user: None,
            password: None,
        }
    }
}

pub(crate) fn default_xa_log_dir() -> String {
    "sextant-xa".into()
}

pub(crate) fn default_recover_interval_ms() -> u64 {
    5000
}

impl Xa {
    pub(crate) fn check(&self, c: &mut Checker) {
        if let Some(id) = &self.instance_id {
            if !crate::valid_id(id) {
                c.err(
                    "xa",
                    "instance_id",
                    format!("{id:?}: an instance id is 1 to 32 letters, digits, '_', '.' or '-' (it is written into every transaction id)"),
                );
            }
        }
        if self.user.is_some() != self.password.is_some() {
            c.err(
                "xa",
                "user",
                "give both user and password (sextant's own account for decisions and recovery), or neither".into(),
            );
        }
        if self.password.as_deref().is_some_and(crate::is_native_hash) {
            c.err(
                "xa",
                "password",
                "sextant logs in to the servers with it: give the password, not a hash".into(),
            );
        }
        if self.recover_interval_ms == 0 {
            c.err(
                "xa",
                "recover_interval_ms",
                "must be at least 1 (recovery must run)".into(),
            );
        }
    }
}

impl crate::Config {
    /// The account sextant's transaction coordinator and recovery use
    /// (user, password): `[xa] user`, else `[monitor] user`, else the
    /// first user's server account.
    pub fn xa_account(&self) -> Option<(String, String)> {
        if let (Some(u), Some(p)) = (&self.xa.user, &self.xa.password) {
            return Some((u.clone(), p.clone()));
        }
        if let (Some(u), Some(p)) = (&self.monitor.user, &self.monitor.password) {
            return Some((u.clone(), p.clone()));
        }
        let u = self.users.first()?;
        Some((
            u.backend_user().to_string(),
            u.backend_password().to_string(),
        ))
    }
}
