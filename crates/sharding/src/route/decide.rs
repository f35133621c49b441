//! The route of an analysed statement: where it runs, and how its
//! results are merged.

use super::keys::{count_value, key_columns, key_value, literal_number, OwnedKey};
use super::merge_plan::grouped_plan;
use super::{MergePlan, Rewrite, Route, Router, WritePlan};
use crate::analyze::{Analysis, GroupSet, OrderItem, Place, StmtKind};
use crate::fingerprint::{Lit, Slot, Val};
use crate::layout::KeyType;
use crate::placement::group_of;

impl Router {
    /// The route of an analysed statement with these values.
    pub fn route_analysis(&self, a: &Analysis, slots: &[Slot<'_>], params: &[Lit<'_>]) -> Route {
        if let Some(why) = &a.refuse {
            return Route::Refuse(why.clone());
        }
        if a.tables.is_empty() {
            return Route::Session;
        }
        let value = |v: &Val, kt: KeyType| key_value(v, slots, params, kt);
        let names = |pred: &dyn Fn(&Place) -> bool| -> String {
            let mut v: Vec<&str> = a
                .tables
                .iter()
                .filter(|t| pred(&t.place))
                .map(|t| t.name.as_str())
                .collect();
            v.dedup();
            v.join(", ")
        };
        let elsewhere = a.tables.iter().any(|t| t.place == Place::Elsewhere);
        if elsewhere {
            if a.tables.iter().all(|t| t.place == Place::Elsewhere) {
                return Route::Session;
            }
            return Route::Refuse(format!(
                "the statement names tables the sharding layout places ({}) together with tables it does not ({})",
                names(&|p| *p != Place::Elsewhere),
                names(&|p| *p == Place::Elsewhere)
            ));
        }
        let all = match self.layout.groups.len() {
            n if n >= 64 => GroupSet(u64::MAX),
            n => GroupSet((1u64 << n) - 1),
        };
        // Keys assigned by UPDATE or ON DUPLICATE KEY UPDATE.
        for (t, v) in &a.sets_key {
            let Place::Sharded { vdb, key } = &a.tables[*t].place else {
                continue;
            };
            let vdb = &self.layout.vdbs[*vdb];
            let stays = match (a.kind, v) {
                (StmtKind::Write, Some(v)) => {
                    let to = self.groups_of_value(vdb, value(v, vdb.key_type));
                    let from = self.keys_groups(vdb, &a.tables[*t].keys, &value);
                    to.len() == 1 && from == to
                }
                _ => false,
            };
            if !stays {
                return Route::Refuse(format!(
                    "the statement changes shard key {key} of {}: the row could have to move to another group",
                    a.tables[*t].name
                ));
            }
        }
        if a.kind == StmtKind::Insert && !a.rows.is_empty() {
            let Some(t) = a.insert_target else {
                return Route::Refuse("an INSERT without a target".into());
            };
            let Place::Sharded { vdb, key } = &a.tables[t].place else {
                return Route::Refuse("an INSERT without a target".into());
            };
            let vdb = &self.layout.vdbs[*vdb];
            let mut set = GroupSet::default();
            let mut row_groups = Vec::with_capacity(a.rows.len());
            for (n, row) in a.rows.iter().enumerate() {
                let g = row
                    .as_ref()
                    .and_then(|v| value(v, vdb.key_type))
                    .and_then(|kv| group_of(vdb, kv.as_key()?))
                    .and_then(|g| self.layout.group_index(g));
                let Some(g) = g else {
                    return Route::Refuse(format!(
                        "row {} of this INSERT into {}: its shard key {key} is not a value sextant can place (give it as a literal or parameter, not NULL or an expression)",
                        n + 1,
                        a.tables[t].name
                    ));
                };
                set = set.union(GroupSet::one(g));
                row_groups.push(g);
            }
            return match set.first() {
                Some(g) if set.len() == 1 => Route::One(g),
                _ => Route::Write(Box::new(WritePlan {
                    groups: set,
                    split: Vec::new(),
                    rows: row_groups,
                    copies: false,
                })),
            };
        }
        let mut required = GroupSet::default();
        let mut copies = all;
        let mut sharded = Vec::new();
        let mut singles = false;
        // Each sharded table's groups by its own keys, then narrowed by the
        // tables whose keys equal its in every row (`c_w_id = w_id AND
        // w_id = 3`: customer is read in warehouse 3's group only).
        let own = |t: &crate::analyze::TableUse| match &t.place {
            Place::Sharded { vdb, .. } => {
                let v = &self.layout.vdbs[*vdb];
                Some(match a.kind {
                    StmtKind::Ddl => self.vdb_groups(v),
                    _ => self.keys_groups(v, &t.keys, &value),
                })
            }
            _ => None,
        };
        // (Only statements with such joins pay for the table of sets.)
        let narrowed = !a.equal_keys.is_empty() && a.kind != StmtKind::Ddl;
        let mut sets: Vec<Option<GroupSet>> = match narrowed {
            true => a.tables.iter().map(own).collect(),
            false => Vec::new(),
        };
        if narrowed {
            let vdb_of = |i: usize| match a.tables.get(i).map(|t| &t.place) {
                Some(Place::Sharded { vdb, .. }) => Some(*vdb),
                _ => None,
            };
            loop {
                let mut changed = false;
                for &(x, y) in &a.equal_keys {
                    if vdb_of(x).is_none() || vdb_of(x) != vdb_of(y) {
                        continue;
                    }
                    if let (Some(Some(sx)), Some(Some(sy))) =
                        (sets.get(x).copied(), sets.get(y).copied())
                    {
                        let both = sx.intersect(sy);
                        if both != sx || both != sy {
                            sets[x] = Some(both);
                            sets[y] = Some(both);
                            changed = true;
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
        }
        for (i, t) in a.tables.iter().enumerate() {
            match &t.place {
                Place::Sharded { vdb, .. } => {
                    let v = &self.layout.vdbs[*vdb];
                    let mut set = match narrowed {
                        true => sets[i],
                        false => own(t),
                    }
                    .unwrap_or_default();
                    if set.is_empty() {
                        // No row can match: any one of its groups answers.
                        set = self
                            .vdb_groups(v)
                            .first()
                            .map(GroupSet::one)
                            .unwrap_or_default();
                    }
                    required = required.union(set);
                    sharded.push((i, *vdb));
                }
                Place::Group(g) => {
                    required = required.union(GroupSet::one(*g));
                    singles = true;
                }
                Place::Global(set) => copies = copies.intersect(*set),
                Place::Elsewhere => {}
            }
        }
        let globals = a.tables.iter().any(|t| matches!(t.place, Place::Global(_)));
        if a.kind == StmtKind::Ddl && a.temporary {
            // The session's own table, on its connection: a name the layout
            // shards would send later statements naming it to other groups.
            return match a.tables.iter().find(|t| matches!(t.place, Place::Sharded { .. })) {
                Some(t) => Route::Refuse(format!(
                    "a temporary table named like {}, which the layout shards: statements naming it would go to the groups of the sharded table; give it another name",
                    t.name
                )),
                None => Route::Session,
            };
        }
        if a.kind == StmtKind::Ddl {
            let set = match globals {
                true => required.union(copies),
                false => required,
            };
            return match set.first() {
                Some(g) if set.len() == 1 => Route::One(g),
                _ => Route::Broadcast(set),
            };
        }
        let writes = a.kind != StmtKind::Read;
        if required.is_empty() {
            // Only global tables.
            if writes {
                return match copies.first() {
                    Some(g) if copies.len() == 1 => Route::One(g),
                    None => Route::Refuse(format!(
                        "no group holds a copy of every global table named ({})",
                        names(&|p| matches!(p, Place::Global(_)))
                    )),
                    Some(_) if a.volatile.is_some() => Route::Refuse(format!(
                        "a write to every copy of global table {} with {}: each copy would compute its own value and the copies would differ; compute the value in the application and write it as a literal or parameter",
                        names(&|p| matches!(p, Place::Global(_))),
                        volatile_shown(a.volatile.unwrap_or_default())
                    )),
                    // Every copy, atomically.
                    _ => Route::Write(Box::new(WritePlan {
                        groups: copies,
                        split: Vec::new(),
                        rows: Vec::new(),
                        copies: true,
                    })),
                };
            }
            return match copies.len() {
                1.. => Route::AnyOf(copies),
                0 => Route::Refuse(format!(
                    "no group holds a copy of every global table named ({})",
                    names(&|p| matches!(p, Place::Global(_)))
                )),
            };
        }
        if globals && writes {
            return Route::Refuse(format!(
                "the statement writes while reading global table {}: sextant does not yet run such writes on a sharded layout",
                names(&|p| matches!(p, Place::Global(_)))
            ));
        }
        if required.intersect(copies) != required {
            return Route::Refuse(format!(
                "global table {} has no copy in group {}",
                names(&|p| matches!(p, Place::Global(_))),
                self.names_of(GroupSet(required.0 & !copies.0))
            ));
        }
        if let Some(g) = required.first().filter(|_| required.len() == 1) {
            return Route::One(g);
        }
        // Several groups: exact only when each result row holds one row
        // of a sharded table (the groups' rows are then disjoint).
        if !singles
            && (writes || a.merge.is_none())
            && !a
                .tables
                .iter()
                .any(|t| t.anchor && matches!(t.place, Place::Sharded { .. }))
        {
            return Route::Refuse(unanchored(a, required.len()));
        }
        if writes && !singles && self.colocated(&sharded, &a.key_joins) {
            if a.limit.is_some() || a.write_limit {
                return Route::Refuse(format!(
                    "the statement writes to {} in {} groups ({}) with a LIMIT: each group would apply the LIMIT to its own rows; restrict it by the shard key to one group",
                    names(&|p| !matches!(p, Place::Global(_))),
                    required.len(),
                    self.names_of(required)
                ));
            }
            // Each group's rows, in one distributed transaction.
            return Route::Write(Box::new(WritePlan {
                groups: required,
                split: Vec::new(),
                rows: Vec::new(),
                copies: false,
            }));
        }
        if singles {
            return Route::Refuse(format!(
                "the statement joins tables in different groups ({}); only tables of one vdb joined on their shard keys, and global tables, can be joined across groups",
                names(&|p| !matches!(p, Place::Global(_)))
            ));
        }
        // The tables of a UNION's parts are not joined: its own reason
        // comes first.
        if a.merge == Some("UNION") && required.len() > 1 {
            return Route::Refuse(format!(
                "a read over {} groups with UNION needs its results merged, which this version does not do yet; restrict it by the shard key to one group",
                required.len()
            ));
        }
        if !self.colocated(&sharded, &a.key_joins) {
            return Route::Refuse(format!(
                "the statement joins sharded tables ({}) other than on equal shard keys of one vdb: their rows may be in different groups",
                names(&|p| matches!(p, Place::Sharded { .. }))
            ));
        }
        if let Some(why) = a.merge {
            return Route::Refuse(format!(
                "a read over {} groups with {why} needs its results merged, which this version does not do yet; restrict it by the shard key to one group",
                required.len()
            ));
        }
        let is_null = |v: &Val| {
            matches!(
                key_value(v, slots, params, KeyType::Int),
                Some(OwnedKey::Null)
            )
        };
        let number = |v: &Val| count_value(v, slots, params);
        let limit = match &a.limit {
            None => (0, None),
            Some((count, offset)) => {
                let offset = match offset {
                    Some(o) => number(o),
                    None => Some(0),
                };
                match (number(count), offset) {
                    (Some(c), Some(o)) => (o, Some(c)),
                    _ => return Route::Refuse("a LIMIT that is not a number".into()),
                }
            }
        };
        if let Some(g) = &a.grouping {
            let plan = g.as_ref().map_err(Clone::clone).and_then(|g| {
                grouped_plan(
                    g,
                    required,
                    limit,
                    &number,
                    &|v| literal_number(v, slots, params),
                    &is_null,
                )
            });
            return match plan {
                Ok(p) => Route::Merge(Box::new(p)),
                Err(why) => Route::Refuse(format!(
                    "a read over {} groups with {why}; restrict it by the shard key to one group",
                    required.len()
                )),
            };
        }
        let order: Vec<&(OrderItem, bool)> = match &a.order {
            // ORDER BY NULL asks for no order (MySQL's way to skip a sort).
            Ok(o) => o
                .iter()
                .filter(|(item, _)| !matches!(item, OrderItem::Position(v) if is_null(v)))
                .collect(),
            Err(why) => {
                return Route::Refuse(format!(
                    "a read over {} groups with {why}: sextant cannot merge the groups' rows by it; restrict it by the shard key to one group",
                    required.len()
                ))
            }
        };
        if order.is_empty() && a.limit.is_none() {
            return Route::Scatter(required);
        }
        let mut exprs = Vec::with_capacity(order.len());
        for (item, _) in &order {
            let e = match item {
                OrderItem::Expr(e) => Some(e.clone()),
                OrderItem::Position(v) => number(v)
                    .and_then(|i| (i as usize).checked_sub(1))
                    .and_then(|i| a.projection.get(i).cloned().flatten()),
            };
            match e {
                Some(e) => exprs.push(e),
                None => {
                    return Route::Refuse(format!(
                        "a read over {} groups ordered by a position that is not a plain item of the select list (a wildcard, or an item with values)",
                        required.len()
                    ))
                }
            }
        }
        let (offset, count) = limit;
        let mut hidden = Vec::with_capacity(3 * exprs.len());
        for e in &exprs {
            hidden.extend(key_columns(e));
        }
        Route::Merge(Box::new(MergePlan {
            groups: required,
            sql: Vec::new(),
            order: order.iter().map(|(_, desc)| *desc).collect(),
            exprs,
            offset,
            count,
            grouped: None,
            rewrite: Rewrite {
                hidden,
                drop_distinct: false,
                clauses: None,
            },
        }))
    }

    /// Every sharded table is joined, directly or through others, to the
    /// first on equal shard keys, and all follow one vdb.
    pub(super) fn colocated(&self, sharded: &[(usize, usize)], joins: &[(usize, usize)]) -> bool {
        let Some(&(first, vdb)) = sharded.first() else {
            return true;
        };
        if sharded.iter().any(|(_, v)| *v != vdb) {
            return false;
        }
        let mut reached = vec![first];
        loop {
            let before = reached.len();
            for &(a, b) in joins {
                if reached.contains(&a) && !reached.contains(&b) {
                    reached.push(b);
                } else if reached.contains(&b) && !reached.contains(&a) {
                    reached.push(a);
                }
            }
            if reached.len() == before {
                break;
            }
        }
        sharded.iter().all(|(t, _)| reached.contains(t))
    }
}

/// Why a read over several groups has no sharded table its rows are made
/// from, naming the construct: each group would answer for the other
/// tables' rows (a global table's copy) once.
fn unanchored(a: &Analysis, groups: u32) -> String {
    let sharded = a
        .tables
        .iter()
        .find(|t| matches!(t.place, Place::Sharded { .. }))
        .map_or("?", |t| t.name.as_str());
    let outer = a
        .tables
        .iter()
        .find(|t| t.anchor)
        .map(|t| format!(" (its rows come from {})", t.name));
    let top = a
        .tables
        .iter()
        .any(|t| matches!(t.place, Place::Sharded { .. }) && t.top);
    match (top, outer) {
        (true, outer) => format!(
            "sharded table {sharded} on the side of an outer join that may be missing{}, over {groups} groups: each group would add the other side's unmatched rows once",
            outer.unwrap_or_default()
        ),
        (false, Some(outer)) => format!(
            "sharded table {sharded} only inside a subquery, derived table or CTE{outer}, over {groups} groups: each group would answer the outer rows from its own part of {sharded}"
        ),
        (false, None) => format!(
            "sharded table {sharded} only inside a subquery, over {groups} groups: each group would answer from its own part of it"
        ),
    }
}

fn volatile_shown(v: &str) -> String {
    match v.starts_with("a ") {
        true => v.to_string(),
        false => format!("{}()", v.to_ascii_uppercase()),
    }
}
