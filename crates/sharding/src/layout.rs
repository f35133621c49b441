use std::collections::BTreeMap;

/// The type of a vdb's shard key, which decides how its values are read
/// and hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Int,
    Str,
    Date,
    DateTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `num` slots; a value's slot is its hash modulo `num`.
    Hash,
    /// Each partition holds the values up to its upper bound, above the
    /// previous partition's.
    Range,
}

/// One group's share of a vdb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partition {
    Hash {
        group: String,
        slots: Vec<u32>,
    },
    /// Values in (previous bound, `upper`]; None: no upper bound.
    RangeInt {
        group: String,
        upper: Option<i64>,
    },
    RangeStr {
        group: String,
        upper: Option<String>,
    },
}

impl Partition {
    pub fn group(&self) -> &str {
        match self {
            Partition::Hash { group, .. }
            | Partition::RangeInt { group, .. }
            | Partition::RangeStr { group, .. } => group,
        }
    }
}

/// A "virtual database": a shard key type, a method, and how its values
/// are spread over groups. Sharded tables name the vdb they follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vdb {
    pub id: u32,
    pub key_type: KeyType,
    pub method: Method,
    /// Hash slots (the `num` of Cetus's files).
    pub num: u32,
    /// Range partitions are kept sorted by upper bound.
    pub partitions: Vec<Partition>,
}

impl Vdb {
    /// The groups holding part of this vdb, each once, in order.
    pub fn groups(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for p in &self.partitions {
            if !v.contains(&p.group()) {
                v.push(p.group());
            }
        }
        v
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedTable {
    pub db: String,
    pub table: String,
    /// The shard key column.
    pub key: String,
    pub vdb: u32,
}

/// Where a table nobody listed lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlisted {
    /// In its database's default group (`part.json`'s `default`).
    DefaultGroup,
    /// A full copy on every group (Cetus's newer rule).
    Global,
}

/// Where one table lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement<'a> {
    Sharded {
        table: &'a ShardedTable,
        vdb: &'a Vdb,
    },
    Single {
        group: &'a str,
    },
    /// A full copy on each of these groups.
    Global {
        groups: &'a [String],
    },
    /// Unlisted, in the database's default group.
    Default {
        group: &'a str,
    },
    /// Unlisted, and the layout says nothing for its database.
    Unknown,
}

/// A whole sharding layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub vdbs: Vec<Vdb>,
    /// By (database, table), lower case.
    pub tables: BTreeMap<(String, String), ShardedTable>,
    /// Single tables: (database, table), lower case -> group.
    pub single: BTreeMap<(String, String), String>,
    /// A database's default group for its unlisted tables.
    pub default_group: BTreeMap<String, String>,
    /// Every group a database's global tables are copied to (`all`).
    pub all_groups: BTreeMap<String, Vec<String>>,
    /// Every group the layout names, each once.
    pub groups: Vec<String>,
    pub unlisted: Unlisted,
    /// Columns whose values sextant gives rows inserted without them:
    /// (database, table), lower case -> the sequence.
    pub sequences: BTreeMap<(String, String), Sequence>,
}

/// A distributed sequence: ids for a column, unique over every group,
/// taken in blocks from a table in one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub column: String,
    /// Ids taken at a time by each sextant.
    pub block: u64,
}

/// Most groups a layout may name (a statement's groups are a 64-bit set).
pub const MAX_GROUPS: usize = 64;

fn key(db: &str, table: &str) -> (String, String) {
    (db.to_ascii_lowercase(), table.to_ascii_lowercase())
}

impl Layout {
    /// The sequence of a table's column, if the layout gives one.
    pub fn sequence(&self, db: &str, table: &str) -> Option<&Sequence> {
        self.sequences.get(&key(db, table))
    }

    /// Where a database's sequences keep their counters: its default
    /// group, else the layout's first.
    pub fn sequence_group(&self, db: &str) -> Option<usize> {
        let name = self
            .default_group
            .get(&db.to_ascii_lowercase())
            .or(self.groups.first())?;
        self.group_index(name)
    }

    pub fn placement(&self, db: &str, table: &str) -> Placement<'_> {
        let k = key(db, table);
        if let Some(t) = self.tables.get(&k) {
            if let Some(vdb) = self.vdbs.iter().find(|v| v.id == t.vdb) {
                return Placement::Sharded { table: t, vdb };
            }
        }
        if let Some(g) = self.single.get(&k) {
            return Placement::Single { group: g };
        }
        let db = k.0;
        // The server's own schemas describe each server: never a layout's.
        if SERVER_SCHEMAS.contains(&db.as_str()) {
            return Placement::Unknown;
        }
        match self.unlisted {
            Unlisted::DefaultGroup => match self.default_group.get(&db) {
                Some(g) => Placement::Default { group: g },
                None => match self.all_groups.get(&db) {
                    Some(all) => Placement::Global { groups: all },
                    None => Placement::Unknown,
                },
            },
            Unlisted::Global => match self.all_groups.get(&db) {
                Some(all) => Placement::Global { groups: all },
                None => Placement::Global {
                    groups: &self.groups,
                },
            },
        }
    }

    /// A group's index in `groups`.
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g == name)
    }

    /// The groups named by the layout that `defined` lacks.
    pub fn undefined_groups<'a>(&'a self, defined: &[&str]) -> Vec<&'a str> {
        self.groups
            .iter()
            .map(String::as_str)
            .filter(|g| !defined.contains(g))
            .collect()
    }

    /// What lives where, for people: one line per vdb, table and rule.
    pub fn explain(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for v in &self.vdbs {
            let method = match v.method {
                Method::Hash => format!("hash into {} slots", v.num),
                Method::Range => "range".to_string(),
            };
            let _ = writeln!(out, "vdb {}: {:?} key, {method}", v.id, v.key_type);
            for p in &v.partitions {
                let _ = match p {
                    Partition::Hash { group, slots } => {
                        let word = if slots.len() == 1 { "slot" } else { "slots" };
                        writeln!(out, "  {word} {} -> {group}", ranges(slots))
                    }
                    Partition::RangeInt { group, upper } => writeln!(
                        out,
                        "  up to {} -> {group}",
                        upper.map_or("no limit".to_string(), |u| match v.key_type {
                            KeyType::Date | KeyType::DateTime => crate::dates::datetime(u),
                            _ => u.to_string(),
                        })
                    ),
                    Partition::RangeStr { group, upper } => writeln!(
                        out,
                        "  up to {} -> {group}",
                        upper
                            .as_deref()
                            .map_or("no limit".to_string(), |u| format!("{u:?}"))
                    ),
                };
            }
        }
        for t in self.tables.values() {
            let _ = writeln!(
                out,
                "table {}.{}: sharded by {} (vdb {})",
                t.db, t.table, t.key, t.vdb
            );
        }
        for ((db, table), g) in &self.single {
            let _ = writeln!(out, "table {db}.{table}: single, in {g}");
        }
        for (db, g) in &self.default_group {
            let _ = writeln!(out, "database {db}: tables not listed are in {g}");
        }
        for (db, gs) in &self.all_groups {
            let _ = writeln!(
                out,
                "database {db}: global tables copied to {}",
                gs.join(", ")
            );
        }
        if self.unlisted == Unlisted::Global {
            let _ = writeln!(out, "tables not listed: global (a copy in every group)");
        }
        for ((db, table), s) in &self.sequences {
            let home = self
                .sequence_group(db)
                .and_then(|g| self.groups.get(g))
                .map_or("?", String::as_str);
            let _ = writeln!(
                out,
                "table {db}.{table}: {} given by a sequence (blocks of {}, counter in {home})",
                s.column, s.block
            );
        }
        out
    }
}

/// `0-3, 7` for [0, 1, 2, 3, 7].
fn ranges(slots: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        let start = slots[i];
        let mut end = start;
        while i + 1 < slots.len() && slots[i + 1] == end + 1 {
            i += 1;
            end = slots[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

/// Schemas each server has of its own (lower case, as `key` folds them).
const SERVER_SCHEMAS: &[&str] = &["information_schema", "mysql", "performance_schema", "sys"];
