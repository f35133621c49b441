//! Where the problems of a file go: each names the file, the line (found
//! in the file's text again: serde gave the values, this says where each
//! key is written) and the key. Every section checks itself into it.

use crate::ConfigError;

pub(crate) struct Checker<'a> {
    doc: Option<toml_edit::ImDocument<&'a str>>,
    text: &'a str,
    path: &'a str,
    errors: &'a mut Vec<ConfigError>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(text: &'a str, path: &'a str, errors: &'a mut Vec<ConfigError>) -> Self {
        Checker {
            doc: toml_edit::ImDocument::parse(text).ok(),
            text,
            path,
            errors,
        }
    }

    /// A problem of `key` in the `index`th `[[table]]` (0 for a table).
    pub(crate) fn at(&mut self, table: &str, index: usize, key: &str, message: String) {
        self.errors.push(ConfigError::Invalid {
            path: self.path.to_string(),
            line: locate(self.doc.as_ref(), self.text, table, index, key),
            key: if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            },
            message,
        });
    }

    /// A problem of `key` in `[table]` (`""`: at the top of the file).
    pub(crate) fn err(&mut self, table: &str, key: &str, message: String) {
        self.at(table, 0, key, message);
    }
}

/// The line of `key` in `table` (dotted, e.g. "groups.main"; in an array
/// of tables such as [[users]], its `index`-th entry), from the spans the
/// TOML parser keeps; a table's own header when the key is not written.
fn locate(
    doc: Option<&toml_edit::ImDocument<&str>>,
    text: &str,
    table: &str,
    index: usize,
    key: &str,
) -> Option<usize> {
    use toml_edit::{Item, TableLike, Value};
    let mut t: &dyn TableLike = doc?.as_table();
    for seg in table.split('.').filter(|s| !s.is_empty()) {
        t = match t.get(seg)? {
            Item::Table(x) => x,
            Item::ArrayOfTables(a) => a.get(index)?,
            Item::Value(Value::InlineTable(x)) => x,
            _ => return None,
        };
    }
    let span = match t.get_key_value(key) {
        Some((k, v)) => k.span().or_else(|| v.span()),
        None => t.get(key).and_then(|v| v.span()),
    }?;
    Some(text[..span.start.min(text.len())].matches('\n').count() + 1)
}
