//! An instance's id: the same across restarts, so that a restarted
//! instance is the same member of the fleet (and finds what is its own).

use crate::FleetError;
use std::path::Path;

/// The configured id, or the one kept in `state_dir`/instance-id, or a new
/// one made at random and kept there.
pub fn load_or_make(configured: Option<&str>, state_dir: &Path) -> Result<String, FleetError> {
    if let Some(id) = configured {
        return Ok(id.to_string());
    }
    let file = state_dir.join("instance-id");
    match std::fs::read_to_string(&file) {
        Ok(s) => {
            let id = s.trim();
            if sextant_config::valid_id(id) {
                return Ok(id.to_string());
            }
            Err(FleetError::InstanceId(format!(
                "{}: {id:?} is not an instance id (1 to 32 letters, digits, '_', '.' or '-'); remove the file to make a new one",
                file.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(state_dir)
                .map_err(|e| FleetError::InstanceId(format!("{}: {e}", state_dir.display())))?;
            let id = format!("s{:08x}", rand::random::<u32>());
            // Written whole then renamed: a crash leaves no half id.
            let tmp = state_dir.join("instance-id.tmp");
            std::fs::write(&tmp, format!("{id}\n"))
                .and_then(|_| std::fs::rename(&tmp, &file))
                .map_err(|e| FleetError::InstanceId(format!("{}: {e}", file.display())))?;
            Ok(id)
        }
        Err(e) => Err(FleetError::InstanceId(format!("{}: {e}", file.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("sextant-fleet-id-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = load_or_make(None, &dir).unwrap();
        assert!(sextant_config::valid_id(&a), "{a}");
        assert_eq!(load_or_make(None, &dir).unwrap(), a);
        assert_eq!(load_or_make(Some("web-1"), &dir).unwrap(), "web-1");
        std::fs::write(dir.join("instance-id"), "not an id!\n").unwrap();
        let e = load_or_make(None, &dir).unwrap_err().to_string();
        assert!(e.contains("not an instance id"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
