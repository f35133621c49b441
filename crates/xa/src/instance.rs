//! The id an instance writes into its transactions' ids, so that its
//! recovery resolves only its own. Unless configured it is made once, at
//! random, and kept beside the decision log: two hosts started from the
//! same config file get different ids, and a restart (a crash's recovery
//! above all) keeps its own.

use crate::XaError;
use std::io::Write;
use std::path::Path;

/// The file beside the decision log that holds the id.
pub const FILE: &str = "instance-id";

/// Whether `id` can name an instance: 1-32 of `A-Z a-z 0-9 _ . -` (it is
/// written into every transaction id, whose parts are at most 64 bytes).
pub fn valid(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The id kept in `dir`, or a new one, written there (synced) before it is
/// used. A log directory an earlier version wrote has decisions under the
/// id that version derived (`legacy`), which is kept so that they stay
/// this instance's. Returns the id and whether it was made now.
pub fn kept(dir: &Path, legacy: impl FnOnce() -> String) -> Result<(String, bool), XaError> {
    let path = dir.join(FILE);
    let io = |source| XaError::Log {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            return match valid(id) {
                true => Ok((id.to_string(), false)),
                false => Err(XaError::Invalid(format!(
                    "{}: {id:?} is not an instance id (1 to 32 letters, digits, '_', '.' or '-'); correct or remove the file",
                    path.display()
                ))),
            };
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let id = match dir.join("decisions.log").exists() {
        true => legacy(),
        false => fresh(),
    };
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(format!("{id}\n").as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok((id, true))
}

/// The host's name (for people reading SHOW XA) and 8 random hex digits.
fn fresh() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .take(20)
        .collect();
    if host.is_empty() {
        host.push_str("sextant");
    }
    format!("{host}-{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sextant-xa-id-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn made_once_kept_after_and_distinct_per_directory() {
        let (a, b) = (dir("a"), dir("b"));
        let (id_a, made) = kept(&a, || "legacy".into()).unwrap();
        assert!(made && valid(&id_a), "{id_a}");
        assert_eq!(kept(&a, || "legacy".into()).unwrap(), (id_a.clone(), false));
        let (id_b, _) = kept(&b, || "legacy".into()).unwrap();
        assert_ne!(id_a, id_b, "two instances of one config");
        for d in [a, b] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn an_earlier_versions_log_keeps_its_id() {
        let d = dir("legacy");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("decisions.log"), b"").unwrap();
        assert_eq!(
            kept(&d, || "127.0.0.1-6033".into()).unwrap().0,
            "127.0.0.1-6033"
        );
        std::fs::write(d.join(FILE), b"not valid!\n").unwrap();
        assert!(kept(&d, || "x".into()).is_err());
        let _ = std::fs::remove_dir_all(d);
    }
}
