//! `SHOW SHARD SCHEMA DIFF db.table`: the proxy asks each group holding
//! the table for its definition; [`schema_diff`] compares them.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};

pub struct ShardSchemaDiff;

impl AdminCommand for ShardSchemaDiff {
    fn syntax(&self) -> &'static str {
        "SHOW SHARD SCHEMA DIFF db.table"
    }
    fn help(&self) -> &'static str {
        "a sharded table's definition in each of its groups, and which differ"
    }
    fn run(&self, q: &Query<'_>, ctx: &Context<'_>) -> Option<Answer> {
        q.after(&["SHOW", "SHARD", "SCHEMA", "DIFF"])
            .map(|rest| shard_schema(rest, ctx))
    }
}

/// SHOW SHARD SCHEMA DIFF db.table: the groups that hold the table.
fn shard_schema(rest: &str, ctx: &Context<'_>) -> Answer {
    use sextant_sharding::Placement;
    let Some(r) = ctx.sharding else {
        return Answer::Error(
            "SHOW SHARD SCHEMA DIFF: the configuration has no [sharding] layout".into(),
        );
    };
    let name = rest.trim().trim_end_matches(';').trim().replace('`', "");
    let Some((db, table)) = name.split_once('.') else {
        return Answer::Error("SHOW SHARD SCHEMA DIFF needs a table as db.table".into());
    };
    let groups: Vec<String> = match r.layout.placement(db, table) {
        Placement::Sharded { vdb, .. } => vdb.groups().iter().map(|g| g.to_string()).collect(),
        Placement::Global { groups } => groups.to_vec(),
        Placement::Single { group } | Placement::Default { group } => vec![group.to_string()],
        Placement::Unknown => {
            return Answer::Error(format!(
                "{db}.{table}: the sharding layout does not place it"
            ))
        }
    };
    Answer::ShardSchema {
        db: db.to_string(),
        table: table.to_string(),
        groups,
    }
}

/// Compares a table's definitions (`SHOW CREATE TABLE`, or the error a
/// group answered) across its groups: one row per group, saying whether
/// it matches the definition most groups have. AUTO_INCREMENT counters
/// differ between groups by nature and are left out.
pub fn schema_diff(defs: &[(String, Result<String, String>)]) -> Table {
    let norm = |d: &str| {
        d.split_whitespace()
            .filter(|w| !w.to_ascii_uppercase().starts_with("AUTO_INCREMENT="))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let normalized: Vec<Option<String>> = defs
        .iter()
        .map(|(_, d)| d.as_ref().ok().map(|d| norm(d)))
        .collect();
    // The definition most groups have.
    let mut common: Option<&String> = None;
    let mut best = 0;
    for d in normalized.iter().flatten() {
        let n = normalized.iter().flatten().filter(|x| *x == d).count();
        if n > best {
            best = n;
            common = Some(d);
        }
    }
    let rows = defs
        .iter()
        .zip(&normalized)
        .map(|((group, d), n)| {
            let status = match (d, n) {
                (Err(e), _) => format!("missing: {e}"),
                (Ok(_), Some(n)) if Some(n) == common => "same".to_string(),
                _ => "differs".to_string(),
            };
            vec![
                Some(group.clone()),
                Some(status),
                Some(d.clone().unwrap_or_default()),
            ]
        })
        .collect();
    Table {
        columns: ["group", "status", "definition"].map(String::from).to_vec(),
        rows,
    }
}
