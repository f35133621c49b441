//! A config pushed to the fleet, as stored in etcd: the file's text, and
//! which sextant wrote it, in a format an older instance can recognise as
//! too new rather than misread.

use serde::{Deserialize, Serialize};

/// The format this version writes and reads.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushedConfig {
    pub format: u32,
    /// `sextant <version>` that validated and stored it.
    pub by: String,
    /// The config file's text, as pushed.
    pub config: String,
}

impl PushedConfig {
    pub fn new(config: String) -> PushedConfig {
        PushedConfig {
            format: FORMAT,
            by: format!("sextant {}", env!("CARGO_PKG_VERSION")),
            config,
        }
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The stored value read back, or why this version cannot use it.
    pub fn decode(stored: &str) -> Result<PushedConfig, String> {
        #[derive(Deserialize)]
        struct Head {
            format: u32,
            #[serde(default)]
            by: String,
        }
        let head: Head = serde_json::from_str(stored)
            .map_err(|e| format!("the stored config is not one sextant wrote: {e}"))?;
        if head.format > FORMAT {
            return Err(format!(
                "pushed by {} in format {}; this sextant {} reads format {FORMAT} at most: upgrade this instance, or push from a version it reads",
                head.by,
                head.format,
                env!("CARGO_PKG_VERSION")
            ));
        }
        serde_json::from_str(stored).map_err(|e| format!("the stored config: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_config_reads_back_and_a_newer_format_is_named_as_such() {
        let p = PushedConfig::new("[proxy]\nlisten = \"127.0.0.1:6033\"\n".into());
        assert_eq!(PushedConfig::decode(&p.encode()), Ok(p));
        let newer = r#"{"format": 2, "by": "sextant 9.0.0", "config": "", "signature": "x"}"#;
        let e = PushedConfig::decode(newer).unwrap_err();
        assert!(e.contains("sextant 9.0.0") && e.contains("format 2"), "{e}");
        assert!(PushedConfig::decode("not json").is_err());
    }
}
