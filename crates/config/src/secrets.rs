//! Passwords in the file: plain, `env:NAME`, `file:/path`, or a mysql_native_password hash.

use serde::{Deserialize, Deserializer};

/// A password as the config may give it: a string, or
/// `{ env = "NAME" }` (the environment variable's value) or
/// `{ file = "/path" }` (the file's contents, without a trailing newline),
/// so that the file itself need not hold it. Read when the config is
/// loaded (and again at each reload).
pub(crate) fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Clear(String),
        Ref(Reference),
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reference {
        env: Option<String>,
        file: Option<String>,
    }
    use serde::de::Error;
    let form = Form::deserialize(d).map_err(|_| {
        D::Error::custom(
            "a password is a string, { env = \"VARIABLE\" } or { file = \"/path/to/file\" }",
        )
    })?;
    match form {
        Form::Clear(s) => Ok(s),
        Form::Ref(Reference {
            env: Some(name),
            file: None,
        }) => std::env::var(&name).map_err(|_| {
            D::Error::custom(format!(
                "environment variable {name:?} (named for this password) is not set"
            ))
        }),
        Form::Ref(Reference {
            env: None,
            file: Some(path),
        }) => match crate::files::read_bounded(
            std::path::Path::new(&path),
            crate::files::MAX_SECRET_BYTES,
        ) {
            Ok(s) => Ok(s
                .strip_suffix('\n')
                .unwrap_or(&s)
                .trim_end_matches('\r')
                .to_string()),
            Err(e) => Err(D::Error::custom(format!(
                "cannot read the password file {path:?}: {e}"
            ))),
        },
        Form::Ref(_) => Err(D::Error::custom(
            "give either env or file, not both (or neither)",
        )),
    }
}

pub(crate) fn optional_secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    secret(d).map(Some)
}

/// Whether `p` is a mysql_native_password hash (`*` and 40 hex digits,
/// SHA1(SHA1(password)) as mysql.user stores it) rather than a password.
pub fn is_native_hash(p: &str) -> bool {
    p.len() == 41 && p.starts_with('*') && p[1..].bytes().all(|b| b.is_ascii_hexdigit())
}
