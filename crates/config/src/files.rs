//! Reading the files a config names (the config itself, a Cetus sharding
//! file, a password file) when whoever names them may not be the host's
//! operator: the admin port's `PUSH CONFIG FROM '<path>'`, and a pushed
//! config's `{ file = ... }` secrets, read by every instance of a fleet.
//! Only a regular file is read, never more than a cap: a FIFO would block
//! the reader for good, `/dev/zero` would never end, and a `/proc` file
//! (which says it is empty) is read as empty.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A config file (or a Cetus sharding file) is at most this large.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// A password file is at most this large.
pub const MAX_SECRET_BYTES: u64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("not a regular file (a {0}): only regular files are read")]
    NotRegular(&'static str),
    #[error("{size} bytes, more than the {max} read from such a file")]
    TooLarge { size: u64, max: u64 },
    #[error("not UTF-8 text")]
    NotText,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The text of the regular file at `path`, if it holds at most `max`
/// bytes. Opened without blocking (a FIFO's open would wait for a
/// writer), then checked by what was opened, not by its name.
pub fn read_bounded(path: &Path, max: u64) -> Result<String, FileError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        return Err(FileError::NotRegular(match () {
            _ if kind.is_dir() => "directory",
            _ if kind.is_fifo() => "FIFO",
            _ if kind.is_char_device() => "character device",
            _ if kind.is_block_device() => "block device",
            _ if kind.is_socket() => "socket",
            _ => "special file",
        }));
    }
    let size = meta.len();
    if size > max {
        return Err(FileError::TooLarge { size, max });
    }
    // No more than the file said it holds: a file that grows while read,
    // or a kernel file that says 0, gives no more.
    let mut buf = Vec::with_capacity(size as usize);
    f.take(size).read_to_end(&mut buf)?;
    String::from_utf8(buf).map_err(|_| FileError::NotText)
}

// Linux's values (the same on every architecture sextant builds for).
const O_NONBLOCK: i32 = 0o4000;
const O_NOCTTY: i32 = 0o400;

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sextant-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_within_the_cap() {
        let d = dir();
        let ok = d.join("ok.toml");
        std::fs::write(&ok, "a = 1\n").unwrap();
        assert_eq!(read_bounded(&ok, 100).unwrap(), "a = 1\n");
        assert!(matches!(
            read_bounded(&ok, 3),
            Err(FileError::TooLarge { size: 6, max: 3 })
        ));
        assert!(matches!(
            read_bounded(&d, 100),
            Err(FileError::NotRegular("directory"))
        ));
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), 100),
            Err(FileError::NotRegular("character device"))
        ));
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = d.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let t = std::time::Instant::now();
        assert!(matches!(
            read_bounded(&fifo, 100),
            Err(FileError::NotRegular("FIFO"))
        ));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        // A kernel file that says it is empty is read as empty.
        assert_eq!(
            read_bounded(Path::new("/proc/self/environ"), 1 << 20).unwrap(),
            ""
        );
        let bin = d.join("bin");
        std::fs::write(&bin, [0xff, 0xfe, 0]).unwrap();
        assert!(matches!(read_bounded(&bin, 100), Err(FileError::NotText)));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A file that is not a config is refused by line and column, its
    /// text never shown back.
    #[test]
    fn parse_errors_show_no_content() {
        for text in [
            "root:$y$j9T$saltsecret$hashsecret:19000:0:99999:7:::\n",
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSj\n",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjsecret = 1\n",
            "[proxy]\nlisten = \"127.0.0.1:1\"\nsecretkey = \"hunter2\"\n",
        ] {
            let e = crate::Config::parse(text, "f.toml")
                .unwrap_err()
                .to_string();
            for s in ["saltsecret", "MIIE", "hunter2", "BEGIN"] {
                assert!(!e.contains(s), "{text:?} shows {s:?}: {e}");
            }
            assert!(e.starts_with("f.toml"), "{e}");
        }
        // A plain key name is still named.
        let e = crate::Config::parse("[proxy]\nlisten_typo = 1\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listen_typo"), "{e}");
    }
}
