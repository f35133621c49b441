//! `[sharding]`: the layout of sharded tables (sextant's own or Cetus's files), sequences, merge memory.

use crate::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// `[sharding]`: which group holds which rows. Either Cetus's own file
/// (`cetus_file`, a sharding.json or part.json, read as it is), or the same
/// keys written here: `[[sharding.vdb]]`, `[[sharding.table]]`,
/// `[[sharding.single_tables]]`, `[sharding.default]`, `[sharding.all]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sharding {
    #[serde(default)]
    pub cetus_file: Option<String>,
    /// Where tables that no vdb, single table or `all` list names live:
    /// "default_group" (their database's `default` group, as part.json) or
    /// "global" (a copy in every group, Cetus's newer rule).
    #[serde(default)]
    pub unlisted: UnlistedRule,
    #[serde(default)]
    pub vdb: Vec<toml::Value>,
    #[serde(default)]
    pub table: Vec<toml::Value>,
    #[serde(default)]
    pub single_tables: Vec<toml::Value>,
    #[serde(default)]
    pub default: BTreeMap<String, String>,
    #[serde(default)]
    pub all: BTreeMap<String, Vec<String>>,
    /// Most memory one statement's merge over several groups may hold
    /// (groups sorted by an aggregate are held until the last arrives);
    /// past it the statement fails with an error instead of growing.
    #[serde(default = "default_merge_memory_mb")]
    pub merge_memory_mb: u64,
    /// `[[sharding.sequence]]`: ids sextant gives rows inserted without
    /// them.
    #[serde(default)]
    pub sequence: Vec<SequenceConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceConfig {
    pub db: String,
    pub table: String,
    pub column: String,
    #[serde(default = "default_sequence_block")]
    pub block: u64,
}

pub(crate) fn default_sequence_block() -> u64 {
    1000
}

pub(crate) fn default_merge_memory_mb() -> u64 {
    64
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnlistedRule {
    #[default]
    DefaultGroup,
    Global,
}

impl Sharding {
    /// The layout, from Cetus's file or from the keys written here.
    pub(crate) fn layout(
        &self,
        text: &str,
        path: &str,
    ) -> Result<sextant_sharding::Layout, ConfigError> {
        use sextant_sharding::{cetus, LayoutError, Unlisted};
        let unlisted = match self.unlisted {
            UnlistedRule::DefaultGroup => Unlisted::DefaultGroup,
            UnlistedRule::Global => Unlisted::Global,
        };
        let inline = !self.vdb.is_empty()
            || !self.table.is_empty()
            || !self.single_tables.is_empty()
            || !self.default.is_empty()
            || !self.all.is_empty();
        let to_config = |e: LayoutError, prefix: &str| match e {
            LayoutError::Syntax {
                file,
                line,
                column,
                message,
            } => ConfigError::Parse {
                path: file,
                message: format!("line {line}, column {column}: {message}"),
            },
            LayoutError::Invalid {
                file,
                line,
                key,
                message,
            } => ConfigError::Invalid {
                path: file,
                line: (line > 0).then_some(line),
                key: format!("{prefix}{key}"),
                message,
            },
        };
        match (&self.cetus_file, inline) {
            (Some(_), true) => Err(ConfigError::Invalid {
                path: path.to_string(),
                line: None,
                key: "sharding.cetus_file".into(),
                message: "give the layout either in cetus_file or here, not both".into(),
            }),
            (Some(file), false) => {
                // Relative to the config file, as people write it.
                let p = Path::new(path)
                    .parent()
                    .map(|d| d.join(file))
                    .filter(|_| Path::new(file).is_relative())
                    .unwrap_or_else(|| Path::new(file).to_path_buf());
                let shown = p.display().to_string();
                let json = crate::files::read_bounded(&p, crate::files::MAX_CONFIG_BYTES).map_err(
                    |source| ConfigError::Read {
                        path: shown.clone(),
                        source,
                    },
                )?;
                cetus::parse(&json, &shown, unlisted).map_err(|e| to_config(e, ""))
            }
            (None, _) => {
                let mut root = serde_json::Map::new();
                root.insert("vdb".into(), to_json(&self.vdb));
                root.insert("table".into(), to_json(&self.table));
                root.insert("single_tables".into(), to_json(&self.single_tables));
                root.insert("default".into(), to_json(&self.default));
                root.insert("all".into(), to_json(&self.all));
                let root = serde_json::Value::Object(root);
                cetus::from_value(&root, text, path, unlisted)
                    .map_err(|e| to_config(e, "sharding."))
            }
        }
        .and_then(|layout| self.with_sequences(layout, path))
    }

    /// The layout with its sequences, each for a table the layout places
    /// in one group or spreads (a global table's copies would each need
    /// the same id: not given).
    fn with_sequences(
        &self,
        mut layout: sextant_sharding::Layout,
        path: &str,
    ) -> Result<sextant_sharding::Layout, ConfigError> {
        use sextant_sharding::Placement;
        for (i, s) in self.sequence.iter().enumerate() {
            let invalid = |message: String| ConfigError::Invalid {
                path: path.to_string(),
                line: None,
                key: format!("sharding.sequence[{i}]"),
                message,
            };
            if s.block == 0 || s.column.is_empty() {
                return Err(invalid(
                    "a sequence needs a column and a block of at least 1".into(),
                ));
            }
            match layout.placement(&s.db, &s.table) {
                Placement::Sharded { .. }
                | Placement::Single { .. }
                | Placement::Default { .. } => {}
                _ => {
                    return Err(invalid(format!(
                        "{}.{} is not a sharded or single table of the layout",
                        s.db, s.table
                    )))
                }
            }
            let key = (s.db.to_ascii_lowercase(), s.table.to_ascii_lowercase());
            let seq = sextant_sharding::Sequence {
                column: s.column.to_ascii_lowercase(),
                block: s.block,
            };
            if layout.sequences.insert(key, seq).is_some() {
                return Err(invalid(format!("{}.{} has two sequences", s.db, s.table)));
            }
        }
        Ok(layout)
    }
}

/// A value of the TOML section as JSON, for the reader of Cetus's format.
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
