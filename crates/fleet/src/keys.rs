//! Where a fleet keeps things in etcd, under `/sextant/<fleet name>/`:
//!
//! - `members/<instance id>`: each live instance's record, under its lease
//!   (gone when the instance stops renewing it);
//! - `intent/backend/<addr>`: a server's administrative state (`online`,
//!   `maintenance`, `offline`), as an admin set it on any instance;
//! - `intent/routing/<key>`: a `[routing]` key's value, likewise;
//! - `intent/config`: the pushed config file, whole;
//! - `slots/<n>`: the live instance whose connection ids start with the
//!   byte `n` (under its lease), so that a KILL of any id finds its owner;
//! - `failover/<group>/leader`: the instance that performs the group's
//!   failovers (under its lease: another takes over when it is gone);
//! - `failover/<group>/term`: the group's newest term and its primary,
//!   sealed, written with compare-and-swap by the leader.
//!
//! Only intent lives here: what the monitors observe (up, down, lag, who
//! is primary) each instance finds out for itself.

/// One intended setting, as the admin port or a push states it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Intent {
    /// A server's state: `online`, `maintenance` or `offline`.
    Backend(String),
    /// A `[routing]` key (its name in the file).
    Routing(String),
    /// The whole config file.
    Config,
}

impl Intent {
    /// The key's part after `intent/`.
    pub fn path(&self) -> String {
        match self {
            Intent::Backend(addr) => format!("backend/{addr}"),
            Intent::Routing(key) => format!("routing/{key}"),
            Intent::Config => "config".into(),
        }
    }

    /// The intent a key's part after `intent/` names, if any.
    pub fn parse(path: &str) -> Option<Intent> {
        if path == "config" {
            return Some(Intent::Config);
        }
        let (kind, name) = path.split_once('/')?;
        if name.is_empty() {
            return None;
        }
        match kind {
            "backend" => Some(Intent::Backend(name.to_string())),
            "routing" => Some(Intent::Routing(name.to_string())),
            _ => None,
        }
    }
}

impl std::fmt::Display for Intent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Intent::Backend(addr) => write!(f, "backend {addr}"),
            Intent::Routing(key) => write!(f, "routing.{key}"),
            Intent::Config => f.write_str("config"),
        }
    }
}

/// The keys of one fleet.
#[derive(Debug, Clone)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(fleet: &str) -> Keys {
        Keys {
            root: format!("/sextant/{fleet}/"),
        }
    }

    pub fn members(&self) -> String {
        format!("{}members/", self.root)
    }

    pub fn member(&self, id: &str) -> String {
        format!("{}members/{id}", self.root)
    }

    pub fn slots(&self) -> String {
        format!("{}slots/", self.root)
    }

    /// The instance holding connection-id slot `n` (under its lease).
    pub fn slot(&self, n: u8) -> String {
        format!("{}slots/{n}", self.root)
    }

    /// The instance that performs group `group`'s failovers.
    pub fn failover_leader(&self, group: &str) -> String {
        format!("{}failover/{group}/leader", self.root)
    }

    /// Group `group`'s newest term.
    pub fn failover_term(&self, group: &str) -> String {
        format!("{}failover/{group}/term", self.root)
    }

    pub fn intents(&self) -> String {
        format!("{}intent/", self.root)
    }

    pub fn intent(&self, i: &Intent) -> String {
        format!("{}intent/{}", self.root, i.path())
    }

    /// The intent a full key names (None: not an intent key of this
    /// fleet, or one a newer version wrote that this one does not know).
    pub fn intent_of(&self, key: &str) -> Option<Intent> {
        Intent::parse(key.strip_prefix(&self.intents())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_round_trip_through_their_keys() {
        let k = Keys::new("prod");
        for i in [
            Intent::Backend("127.0.0.1:3307".into()),
            Intent::Routing("consistency".into()),
            Intent::Config,
        ] {
            let key = k.intent(&i);
            assert!(key.starts_with("/sextant/prod/intent/"), "{key}");
            assert_eq!(k.intent_of(&key), Some(i));
        }
    }

    #[test]
    fn keys_of_other_fleets_and_unknown_kinds_are_not_intents() {
        let k = Keys::new("prod");
        assert_eq!(k.intent_of("/sextant/prod2/intent/config"), None);
        assert_eq!(k.intent_of("/sextant/other/intent/config"), None);
        assert_eq!(k.intent_of("/sextant/prod/intent/quota/x"), None);
        assert_eq!(k.intent_of("/sextant/prod/intent/backend/"), None);
        assert_eq!(k.intent_of("/sextant/prod/members/a"), None);
    }
}
