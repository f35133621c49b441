//! `failover = "auto"` and what goes with it in `[groups.<name>]`.

use crate::check::Checker;
use crate::{Group, Topology};
use serde::Deserialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailoverMode {
    /// Sextant follows failovers other tools perform.
    #[default]
    Off,
    /// Sextant promotes a replica when the primary fails.
    Auto,
}

/// How long the primary fails checks before a failover, by default: long
/// enough that a server restarting or a network blip of a second or two
/// does not cost a promotion, short enough for the "seconds" users want
/// (MaxScale's defaults wait 25 s).
pub(crate) fn default_after_ms() -> u64 {
    3_000
}

/// What a failover takes after detection (the candidate applying its
/// relay log, promotion, repointing), added to failover_after_ms for the
/// default time a write waits for the new primary.
pub const PROMOTION_ALLOWANCE_MS: u64 = 12_000;

pub(crate) fn check(t: &str, g: &Group, c: &mut Checker) {
    if g.failover == FailoverMode::Auto {
        if g.topology != Topology::Replication {
            c.err(
                t,
                "failover",
                "\"auto\" needs topology = \"replication\" (Galera and Group Replication elect their own primaries)".into(),
            );
        }
        if !g.replicas.iter().any(|r| r.promotable) {
            c.err(
                t,
                "failover",
                "\"auto\" needs at least one replica that may be promoted (promotable = true)"
                    .into(),
            );
        }
        if !(500..=600_000).contains(&g.failover_after_ms) {
            c.err(
                t,
                "failover_after_ms",
                format!(
                    "{} is outside 500..600000 (shorter than half a second would promote on a blip)",
                    g.failover_after_ms
                ),
            );
        }
    }
    if g.replication_user.is_some() != g.replication_password.is_some() {
        c.err(
            t,
            "replication_user",
            "replication_user and replication_password go together".into(),
        );
    }
}

/// What failover asks of the rest of the config.
pub(crate) fn check_config(cfg: &crate::Config, c: &mut Checker) {
    for (name, g) in &cfg.groups {
        if g.failover != FailoverMode::Auto {
            continue;
        }
        if !cfg.monitor.enabled {
            c.err(
                &format!("groups.{name}"),
                "failover",
                "\"auto\" needs the monitor ([monitor] enabled = true): it is what sees the primary fail".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn errors(group: &str) -> String {
        let text = format!(
            "[proxy]\nlisten = \"127.0.0.1:6033\"\n[[users]]\nname = \"u\"\npassword = \"p\"\n[groups.g]\nprimary = \"127.0.0.1:1\"\nreplicas = [\"127.0.0.1:2\"]\n{group}"
        );
        match Config::parse(&text, "t.toml") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn auto_failover_is_checked() {
        assert_eq!(
            errors("topology = \"replication\"\nfailover = \"auto\"\n"),
            ""
        );
        let e = errors("failover = \"auto\"\n");
        assert!(e.contains("needs topology = \"replication\""), "{e}");
        let e = errors("topology = \"galera\"\nfailover = \"auto\"\n");
        assert!(e.contains("needs topology"), "{e}");
        let e = errors("topology = \"replication\"\nfailover = \"auto\"\nfailover_after_ms = 10\n");
        assert!(e.contains("failover_after_ms"), "{e}");
        let e = errors("replication_user = \"repl\"\n");
        assert!(e.contains("go together"), "{e}");
        let e = errors("failover = \"sometimes\"\n");
        assert!(!e.is_empty());
    }

    #[test]
    fn a_group_needs_a_promotable_replica() {
        let text = "[proxy]\nlisten = \"127.0.0.1:6033\"\n[[users]]\nname = \"u\"\npassword = \"p\"\n[groups.g]\nprimary = \"127.0.0.1:1\"\nreplicas = [{ addr = \"127.0.0.1:2\", promotable = false }]\ntopology = \"replication\"\nfailover = \"auto\"\n";
        let e = crate::Config::parse(text, "t.toml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("promotable"), "{e}");
    }

    #[test]
    fn writes_wait_through_a_failover_by_default() {
        let g = |extra: &str| {
            let text = format!("[proxy]\nlisten = \"127.0.0.1:6033\"\n[[users]]\nname = \"u\"\npassword = \"p\"\n[groups.g]\nprimary = \"127.0.0.1:1\"\nreplicas = [\"127.0.0.1:2\"]\ntopology = \"replication\"\n{extra}");
            crate::Config::parse(&text, "t.toml")
                .map(|c| c.groups["g"].primary_wait_ms())
                .unwrap_or(u64::MAX)
        };
        assert_eq!(g(""), 0);
        assert_eq!(
            g("failover = \"auto\"\n"),
            3_000 + super::PROMOTION_ALLOWANCE_MS
        );
        assert_eq!(g("failover = \"auto\"\nprimary_wait_ms = 100\n"), 100);
    }
}
