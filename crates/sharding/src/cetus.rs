//! Cetus's sharding files, read as they are: `sharding.json` (`vdb`,
//! `table`, `single_tables`) and the older `part.json`, which adds
//! `default` (a database's group for tables not listed) and `all` (the
//! groups a database's global tables are copied to).
//!
//! Where Cetus logs a warning and carries on (a slot outside the vdb, a
//! vdb no table can find), sextant refuses the file: a layout that could
//! put a row nowhere, or in two places, must not serve.

use crate::dates::epoch;
use crate::error::LayoutError;
use crate::layout::{KeyType, Layout, Method, Partition, ShardedTable, Unlisted, Vdb};
use serde_json::Value;
use std::collections::BTreeMap;

/// Most hash slots a vdb may have (as Cetus).
pub const MAX_SLOTS: u32 = 1024;

/// Reads a Cetus sharding file. `file` names it in errors; `unlisted` is
/// the rule for tables the file does not list (the file cannot say it).
pub fn parse(text: &str, file: &str, unlisted: Unlisted) -> Result<Layout, LayoutError> {
    let root: Value = serde_json::from_str(text).map_err(|e| LayoutError::Syntax {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let r = Reader {
        text,
        file,
        quoted_keys: true,
    };
    r.layout(&root, unlisted)
}

/// The same layout written in another format (sextant's TOML `[sharding]`
/// section, converted to a JSON value): `text` is that file's text, where
/// keys are not quoted, for the lines in errors.
pub fn from_value(
    root: &Value,
    text: &str,
    file: &str,
    unlisted: Unlisted,
) -> Result<Layout, LayoutError> {
    let r = Reader {
        text,
        file,
        quoted_keys: false,
    };
    r.layout(root, unlisted)
}

struct Reader<'a> {
    text: &'a str,
    file: &'a str,
    /// JSON: keys are written quoted; TOML: bare.
    quoted_keys: bool,
}

impl Reader<'_> {
    /// An error about the value at `path`, found in the file by the keys
    /// and strings `anchors` (in order) to give its line.
    fn invalid(&self, path: &str, anchors: &[&str], message: impl Into<String>) -> LayoutError {
        LayoutError::Invalid {
            file: self.file.to_string(),
            line: self.line_of(anchors),
            key: path.to_string(),
            message: message.into(),
        }
    }

    /// The line where `anchors` occur one after the other (0: not found).
    fn line_of(&self, anchors: &[&str]) -> usize {
        let (mut at, mut start) = (0, None);
        for a in anchors {
            let rest = self.text.get(at..).unwrap_or_default();
            // A quoted key is written bare in TOML (`id = 1`).
            let bare = a.strip_prefix('"').and_then(|k| k.strip_suffix('"'));
            let found = match (self.quoted_keys, bare) {
                (false, Some(k)) => rest.find(a).or_else(|| rest.find(k)).map(|i| (i, k.len())),
                _ => rest.find(a).map(|i| (i, a.len())),
            };
            let Some((i, len)) = found else { return 0 };
            start = Some(at + i);
            at += i + len;
        }
        start.map_or(0, |s| self.text[..s].matches('\n').count() + 1)
    }

    fn layout(&self, root: &Value, unlisted: Unlisted) -> Result<Layout, LayoutError> {
        let Some(obj) = root.as_object() else {
            return Err(self.invalid("(top)", &[], "the file must hold one JSON object"));
        };
        let vdbs = match obj.get("vdb") {
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| self.vdb(i, v))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(self.invalid("vdb", &["\"vdb\""], "must be an array")),
            None => Vec::new(),
        };
        for (i, v) in vdbs.iter().enumerate() {
            if vdbs[..i].iter().any(|o| o.id == v.id) {
                return Err(self.invalid(
                    &format!("vdb[{i}].id"),
                    &["\"vdb\"", &format!("\"id\":{}", v.id)],
                    format!("vdb {} is defined twice", v.id),
                ));
            }
        }
        let mut tables = BTreeMap::new();
        if let Some(list) = obj.get("table") {
            let Some(list) = list.as_array() else {
                return Err(self.invalid("table", &["\"table\""], "must be an array"));
            };
            for (i, t) in list.iter().enumerate() {
                let st = self.table(i, t)?;
                if !vdbs.iter().any(|v| v.id == st.vdb) {
                    return Err(self.invalid(
                        &format!("table[{i}].vdb"),
                        &[&format!("\"{}\"", st.table)],
                        format!(
                            "table {}.{} names vdb {}, which is not defined",
                            st.db, st.table, st.vdb
                        ),
                    ));
                }
                let k = (st.db.to_ascii_lowercase(), st.table.to_ascii_lowercase());
                if tables.contains_key(&k) {
                    return Err(self.invalid(
                        &format!("table[{i}]"),
                        &[&format!("\"{}\"", st.table), &format!("\"{}\"", st.table)],
                        format!("table {}.{} is listed twice", st.db, st.table),
                    ));
                }
                tables.insert(k, st);
            }
        }
        let mut single = BTreeMap::new();
        if let Some(list) = obj.get("single_tables") {
            let Some(list) = list.as_array() else {
                return Err(self.invalid(
                    "single_tables",
                    &["\"single_tables\""],
                    "must be an array",
                ));
            };
            for (i, t) in list.iter().enumerate() {
                let path = format!("single_tables[{i}]");
                let get = |k: &str| t.get(k).and_then(Value::as_str);
                let (Some(db), Some(table), Some(group)) = (get("db"), get("table"), get("group"))
                else {
                    return Err(self.invalid(
                        &path,
                        &["\"single_tables\""],
                        "a single table needs \"db\", \"table\" and \"group\" strings",
                    ));
                };
                let k = (db.to_ascii_lowercase(), table.to_ascii_lowercase());
                if tables.contains_key(&k) || single.contains_key(&k) {
                    return Err(self.invalid(
                        &path,
                        &["\"single_tables\"", &format!("\"{table}\"")],
                        format!("table {db}.{table} is listed twice"),
                    ));
                }
                single.insert(k, group.to_string());
            }
        }
        let mut default_group = BTreeMap::new();
        if let Some(d) = obj.get("default") {
            let Some(d) = d.as_object() else {
                return Err(self.invalid(
                    "default",
                    &["\"default\""],
                    "must map databases to a group",
                ));
            };
            for (db, g) in d {
                let Some(g) = g.as_str() else {
                    return Err(self.invalid(
                        &format!("default.{db}"),
                        &["\"default\"", &format!("\"{db}\"")],
                        "must be a group name",
                    ));
                };
                default_group.insert(db.to_ascii_lowercase(), g.to_string());
            }
        }
        let mut all_groups = BTreeMap::new();
        if let Some(a) = obj.get("all") {
            let Some(a) = a.as_object() else {
                return Err(self.invalid("all", &["\"all\""], "must map databases to groups"));
            };
            for (db, gs) in a {
                let names: Option<Vec<String>> = gs.as_array().map(|v| {
                    v.iter()
                        .filter_map(|g| g.as_str().map(String::from))
                        .collect()
                });
                match names {
                    Some(n) if !n.is_empty() && n.len() == gs.as_array().map_or(0, Vec::len) => {
                        all_groups.insert(db.to_ascii_lowercase(), n);
                    }
                    _ => {
                        return Err(self.invalid(
                            &format!("all.{db}"),
                            &["\"all\"", &format!("\"{db}\"")],
                            "must be a list of group names",
                        ))
                    }
                }
            }
        }
        if vdbs.is_empty() && single.is_empty() && default_group.is_empty() {
            return Err(self.invalid(
                "(top)",
                &[],
                "no \"vdb\", \"single_tables\" or \"default\": nothing is placed",
            ));
        }
        let mut groups: Vec<String> = Vec::new();
        let mut add = |g: &str| {
            if !groups.iter().any(|x| x == g) {
                groups.push(g.to_string());
            }
        };
        for v in &vdbs {
            v.partitions.iter().for_each(|p| add(p.group()));
        }
        single.values().for_each(|g| add(g));
        default_group.values().for_each(|g| add(g));
        all_groups.values().flatten().for_each(|g| add(g));
        if groups.len() > crate::layout::MAX_GROUPS {
            return Err(self.invalid(
                "(top)",
                &[],
                format!(
                    "{} groups: a layout may name at most {}",
                    groups.len(),
                    crate::layout::MAX_GROUPS
                ),
            ));
        }
        Ok(Layout {
            vdbs,
            tables,
            single,
            default_group,
            all_groups,
            groups,
            unlisted,
            sequences: BTreeMap::new(),
        })
    }

    fn vdb(&self, i: usize, v: &Value) -> Result<Vdb, LayoutError> {
        let path = format!("vdb[{i}]");
        // The i-th vdb's text starts at its i-th "id" after "vdb".
        let mut at: Vec<String> = vec!["\"vdb\"".into()];
        at.extend((0..=i).map(|_| "\"id\"".to_string()));
        let anchors = |extra: &str| -> Vec<String> {
            let mut a = at.clone();
            a.push(extra.to_string());
            a
        };
        let err = |key: &str, msg: String| {
            let a = anchors(&format!("\"{key}\""));
            let refs: Vec<&str> = a.iter().map(String::as_str).collect();
            self.invalid(&format!("{path}.{key}"), &refs, msg)
        };
        let id = match v.get("id") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        }
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| err("id", "a vdb needs a numeric \"id\"".into()))?;
        let key_type = match v
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("int") => KeyType::Int,
            Some("str") | Some("char") | Some("string") => KeyType::Str,
            Some("date") => KeyType::Date,
            Some("datetime") => KeyType::DateTime,
            other => {
                return Err(err(
                    "type",
                    format!("{other:?} is not a key type: int, str (char), date or datetime"),
                ))
            }
        };
        let method = match v
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("hash") => Method::Hash,
            Some("range") => Method::Range,
            other => {
                return Err(err(
                    "method",
                    format!("{other:?} is not a method: hash or range"),
                ))
            }
        };
        let num = v.get("num").and_then(Value::as_u64).unwrap_or(0);
        if method == Method::Hash && !(1..=MAX_SLOTS as u64).contains(&num) {
            return Err(err(
                "num",
                format!("a hash vdb needs 1 to {MAX_SLOTS} slots, not {num}"),
            ));
        }
        let Some(parts) = v.get("partitions").and_then(Value::as_object) else {
            return Err(err(
                "partitions",
                "must map groups to slots or upper bounds".into(),
            ));
        };
        let mut partitions = Vec::new();
        for (group, spec) in parts {
            let perr = |msg: String| {
                let a = anchors("\"partitions\"");
                let mut refs: Vec<&str> = a.iter().map(String::as_str).collect();
                let g = format!("\"{group}\"");
                refs.push(&g);
                self.invalid(&format!("{path}.partitions.{group}"), &refs, msg)
            };
            match method {
                Method::Hash => {
                    let slots: Option<Vec<u64>> = spec
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_u64).collect());
                    let Some(slots) =
                        slots.filter(|s| Some(s.len()) == spec.as_array().map(Vec::len))
                    else {
                        return Err(perr("a hash partition is a list of slot numbers".into()));
                    };
                    if let Some(bad) = slots.iter().find(|&&s| s >= num) {
                        return Err(perr(format!(
                            "slot {bad} is outside the vdb's {num} slots (0 to {})",
                            num - 1
                        )));
                    }
                    let mut slots: Vec<u32> = slots.into_iter().map(|s| s as u32).collect();
                    slots.sort_unstable();
                    slots.dedup();
                    partitions.push(Partition::Hash {
                        group: group.clone(),
                        slots,
                    });
                }
                Method::Range => {
                    let bounds: Vec<&Value> = match spec {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    for b in bounds {
                        let p = match (key_type, b) {
                            (_, Value::Null) if key_type == KeyType::Str => {
                                Partition::RangeStr { group: group.clone(), upper: None }
                            }
                            (_, Value::Null) => Partition::RangeInt { group: group.clone(), upper: None },
                            (KeyType::Int, Value::Number(n)) if n.is_i64() => Partition::RangeInt {
                                group: group.clone(),
                                upper: n.as_i64(),
                            },
                            (KeyType::Int, Value::String(s)) if s.trim().parse::<i64>().is_ok() => {
                                Partition::RangeInt {
                                    group: group.clone(),
                                    upper: s.trim().parse().ok(),
                                }
                            }
                            (KeyType::Str, Value::String(s)) => Partition::RangeStr {
                                group: group.clone(),
                                upper: Some(s.clone()),
                            },
                            (KeyType::Date | KeyType::DateTime, Value::String(s)) => match epoch(s) {
                                Some(e) => Partition::RangeInt { group: group.clone(), upper: Some(e) },
                                None => {
                                    return Err(perr(format!(
                                        "{s:?} is not a date (YYYY-MM-DD) or datetime (YYYY-MM-DD hh:mm:ss)"
                                    )))
                                }
                            },
                            (t, other) => {
                                return Err(perr(format!("{other} is not an upper bound for a {t:?} key")))
                            }
                        };
                        partitions.push(p);
                    }
                }
            }
        }
        if method == Method::Hash {
            // Every slot in exactly one group: a row has one place.
            let mut owner: Vec<Option<&str>> = vec![None; num as usize];
            for p in &partitions {
                if let Partition::Hash { group, slots } = p {
                    for &s in slots {
                        if let Some(other) = owner[s as usize] {
                            return Err(err(
                                "partitions",
                                format!("slot {s} is in both {other} and {group}"),
                            ));
                        }
                        owner[s as usize] = Some(group);
                    }
                }
            }
            let missing: Vec<String> = owner
                .iter()
                .enumerate()
                .filter(|(_, o)| o.is_none())
                .map(|(s, _)| s.to_string())
                .collect();
            if !missing.is_empty() {
                return Err(err(
                    "partitions",
                    format!(
                        "slots {} are in no group: rows hashing there would have no place",
                        missing.join(", ")
                    ),
                ));
            }
        } else {
            sort_ranges(&mut partitions);
            let uppers: Vec<Option<String>> = partitions
                .iter()
                .map(|p| match p {
                    Partition::RangeInt { upper, .. } => upper.map(|u| u.to_string()),
                    Partition::RangeStr { upper, .. } => upper.clone(),
                    Partition::Hash { .. } => None,
                })
                .collect();
            for w in uppers.windows(2) {
                if w[0] == w[1] {
                    return Err(err(
                        "partitions",
                        format!(
                            "two partitions end at {}: ranges must increase",
                            w[0].as_deref().unwrap_or("no limit")
                        ),
                    ));
                }
            }
            if partitions.is_empty() {
                return Err(err("partitions", "no partitions".into()));
            }
        }
        Ok(Vdb {
            id,
            key_type,
            method,
            num: num as u32,
            partitions,
        })
    }

    fn table(&self, i: usize, t: &Value) -> Result<ShardedTable, LayoutError> {
        let get = |k: &str| t.get(k).and_then(Value::as_str);
        let vdb = match t.get("vdb") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        }
        .and_then(|n| u32::try_from(n).ok());
        match (get("db"), get("table"), get("pkey"), vdb) {
            (Some(db), Some(table), Some(key), Some(vdb)) => Ok(ShardedTable {
                db: db.to_string(),
                table: table.to_string(),
                key: key.to_string(),
                vdb,
            }),
            _ => {
                let anchor = get("table").map(|t| format!("\"{t}\""));
                Err(self.invalid(
                    &format!("table[{i}]"),
                    &[anchor.as_deref().unwrap_or("\"table\"")],
                    "a sharded table needs \"db\", \"table\", \"pkey\" and a numeric \"vdb\"",
                ))
            }
        }
    }
}

/// Range partitions by upper bound, the unbounded one last.
fn sort_ranges(parts: &mut [Partition]) {
    parts.sort_by(|a, b| match (a, b) {
        (Partition::RangeInt { upper: x, .. }, Partition::RangeInt { upper: y, .. }) => x
            .unwrap_or(i64::MAX)
            .cmp(&y.unwrap_or(i64::MAX))
            .then(x.is_none().cmp(&y.is_none())),
        (Partition::RangeStr { upper: x, .. }, Partition::RangeStr { upper: y, .. }) => {
            match (x, y) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, _) => std::cmp::Ordering::Greater,
                (_, None) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) => x.as_bytes().cmp(y.as_bytes()),
            }
        }
        _ => std::cmp::Ordering::Equal,
    });
}
