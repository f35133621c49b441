//! The constructs of a statement and where sextant runs them: over several
//! groups (merged, or as one distributed write) or only within one. Each
//! entry carries statements that show it; the test `tests/constructs.rs`
//! routes every one of them through the planner and fails if the planner
//! does otherwise than the entry says, and docs/sharding.md's table is
//! written from this list ([`markdown`]), so neither can drift from the
//! planner.

/// Where a construct runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Over several groups, answered as one server answers it.
    Several,
    /// Within one group; over several it is refused, with the reason.
    OneGroup,
}

/// One construct, with statements (on the TPC-C layout of
/// `tests/golden/part.json`, unlisted tables global: `item` is) that use
/// it over several groups and within one.
#[derive(Debug, Clone, Copy)]
pub struct Construct {
    pub name: &'static str,
    pub reach: Reach,
    pub several: &'static str,
    /// None: the construct always spans groups (a write to every copy of
    /// a global table).
    pub one: Option<&'static str>,
    pub note: &'static str,
}

const fn c(
    name: &'static str,
    reach: Reach,
    several: &'static str,
    one: Option<&'static str>,
    note: &'static str,
) -> Construct {
    Construct {
        name,
        reach,
        several,
        one,
        note,
    }
}

use Reach::{OneGroup, Several};

pub const CONSTRUCTS: &[Construct] = &[
    c("rows of a sharded table", Several, "SELECT w_id, w_name FROM warehouse WHERE w_tax > 1", Some("SELECT w_id, w_name FROM warehouse WHERE w_id = 3"), "each group's rows in turn"),
    c("ORDER BY columns, aliases, positions", Several, "SELECT w_id, w_name AS n FROM warehouse ORDER BY n DESC, 1", Some("SELECT w_id, w_name AS n FROM warehouse WHERE w_id = 3 ORDER BY n DESC, 1"), "merged by the server's collation weights"),
    c("LIMIT and OFFSET", Several, "SELECT w_id FROM warehouse ORDER BY w_id LIMIT 5 OFFSET 10", Some("SELECT w_id FROM warehouse WHERE w_id = 3 ORDER BY w_id LIMIT 5 OFFSET 10"), "streamed; each group runs LIMIT offset + count"),
    c("COUNT, SUM, MIN, MAX", Several, "SELECT COUNT(*), SUM(w_ytd), MIN(w_name), MAX(w_tax) FROM warehouse", Some("SELECT COUNT(*), SUM(w_ytd) FROM warehouse WHERE w_id = 3"), "exact for integers and DECIMAL"),
    c("AVG", Several, "SELECT AVG(w_ytd) FROM warehouse", Some("SELECT AVG(w_ytd) FROM warehouse WHERE w_id = 3"), "from each group's SUM and COUNT"),
    c("GROUP BY and HAVING on integers", Several, "SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name HAVING COUNT(*) > 1", Some("SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name HAVING COUNT(*) > 1"), "streamed in key order"),
    c("DISTINCT", Several, "SELECT DISTINCT w_name FROM warehouse", Some("SELECT DISTINCT w_name FROM warehouse WHERE w_id = 3"), ""),
    c("COUNT(DISTINCT x)", Several, "SELECT COUNT(DISTINCT w_name) FROM warehouse", Some("SELECT COUNT(DISTINCT w_name) FROM warehouse WHERE w_id = 3"), "one DISTINCT argument"),
    c("+ - * and one / over aggregates", Several, "SELECT SUM(w_ytd) * 2 - COUNT(*) FROM warehouse", Some("SELECT SUM(w_ytd) * 2 - COUNT(*) FROM warehouse WHERE w_id = 3"), ""),
    c("joins on equal shard keys of one vdb", Several, "SELECT c.c_last, d.d_name FROM customer c JOIN district d ON c.c_w_id = d.d_w_id AND c.c_d_id = d.d_id", Some("SELECT c.c_last, d.d_name FROM customer c JOIN district d ON c.c_w_id = d.d_w_id AND c.c_d_id = d.d_id WHERE c.c_w_id = 3"), ""),
    c("a global table joined to a sharded one", Several, "SELECT s_quantity, i_name FROM stock JOIN item ON s_i_id = i_id", Some("SELECT s_quantity, i_name FROM stock JOIN item ON s_i_id = i_id WHERE s_w_id = 2"), "the sharded table in the statement's own FROM"),
    c("subqueries correlated on the shard key", Several, "SELECT c_last FROM customer c WHERE EXISTS (SELECT 1 FROM district d WHERE d.d_w_id = c.c_w_id)", Some("SELECT c_last FROM customer c WHERE c.c_w_id = 3 AND EXISTS (SELECT 1 FROM district d WHERE d.d_w_id = c.c_w_id AND d.d_w_id = 3)"), ""),
    c("UPDATE and DELETE", Several, "UPDATE warehouse SET w_tax = 1 WHERE w_name = 'x'", Some("UPDATE warehouse SET w_tax = 1 WHERE w_id = 3"), "one distributed transaction, XA"),
    c("INSERT with rows for several groups", Several, "INSERT INTO warehouse (w_id, w_name) VALUES (1, 'a'), (2, 'b')", Some("INSERT INTO warehouse (w_id, w_name) VALUES (1, 'a'), (5, 'b')"), "split by group, one distributed transaction"),
    c("writes to a global table", Several, "UPDATE item SET i_price = 1 WHERE i_id = 5", None, "every copy, one distributed transaction"),
    c("GROUP BY ... WITH ROLLUP", OneGroup, "SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name WITH ROLLUP", Some("SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name WITH ROLLUP"), ""),
    c("EXPLAIN", OneGroup, "EXPLAIN SELECT * FROM warehouse", Some("EXPLAIN SELECT * FROM warehouse WHERE w_id = 3"), ""),
    c("UPDATE or DELETE with LIMIT, UPDATE ... ORDER BY", OneGroup, "UPDATE warehouse SET w_tax = 1 ORDER BY w_name LIMIT 1", Some("UPDATE warehouse SET w_tax = 1 WHERE w_id = 3 ORDER BY w_name LIMIT 1"), "each group would apply it to its own rows"),
    c("UNION", OneGroup, "SELECT w_id FROM warehouse UNION SELECT d_w_id FROM district", Some("SELECT w_id FROM warehouse WHERE w_id = 3 UNION SELECT d_w_id FROM district WHERE d_w_id = 3"), ""),
    c("WITH (CTEs) and derived tables", OneGroup, "SELECT n FROM (SELECT w_name AS n FROM warehouse) t", Some("SELECT n FROM (SELECT w_name AS n FROM warehouse WHERE w_id = 3) t"), ""),
    c("window functions", OneGroup, "SELECT w_id, ROW_NUMBER() OVER (ORDER BY w_id) FROM warehouse", Some("SELECT w_id, ROW_NUMBER() OVER (ORDER BY w_id) FROM warehouse WHERE w_id = 3"), ""),
    c("GROUP_CONCAT, STD, VARIANCE, BIT_AND, JSON_ARRAYAGG", OneGroup, "SELECT GROUP_CONCAT(w_name) FROM warehouse", Some("SELECT GROUP_CONCAT(w_name) FROM warehouse WHERE w_id = 3"), ""),
    c("other expressions over aggregates", OneGroup, "SELECT ROUND(SUM(w_ytd), 1) FROM warehouse", Some("SELECT ROUND(SUM(w_ytd), 1) FROM warehouse WHERE w_id = 3"), ""),
    c("HAVING beyond comparisons with integers", OneGroup, "SELECT w_name, COUNT(*) FROM warehouse GROUP BY w_name HAVING COUNT(*) > 1.5", Some("SELECT w_name, COUNT(*) FROM warehouse WHERE w_id = 3 GROUP BY w_name HAVING COUNT(*) > 1.5"), ""),
    c("ORDER BY an expression with literal values", OneGroup, "SELECT w_id FROM warehouse ORDER BY FIELD(w_id, 3, 1)", Some("SELECT w_id FROM warehouse WHERE w_id = 3 ORDER BY FIELD(w_id, 3, 1)"), ""),
    c("DISTINCT together with GROUP BY", OneGroup, "SELECT DISTINCT w_name FROM warehouse GROUP BY w_name, w_tax", Some("SELECT DISTINCT w_name FROM warehouse WHERE w_id = 3 GROUP BY w_name, w_tax"), ""),
    c("SQL_CALC_FOUND_ROWS", OneGroup, "SELECT SQL_CALC_FOUND_ROWS w_id FROM warehouse ORDER BY w_id LIMIT 5", Some("SELECT SQL_CALC_FOUND_ROWS w_id FROM warehouse WHERE w_id = 3 LIMIT 5"), ""),
    c("joins of sharded tables not on equal shard keys", OneGroup, "SELECT c.c_last FROM customer c JOIN district d ON c.c_d_id = d.d_id", Some("SELECT c.c_last FROM customer c JOIN district d ON c.c_d_id = d.d_id WHERE c.c_w_id = 3 AND d.d_w_id = 3"), ""),
    c("a sharded table only in a subquery or an outer join's optional side", OneGroup, "SELECT COUNT(*) FROM item WHERE i_id IN (SELECT s_i_id FROM stock)", Some("SELECT COUNT(*) FROM item WHERE i_id IN (SELECT s_i_id FROM stock WHERE s_w_id = 3)"), "each group would answer for the global table's rows"),
    c("values each copy of a global table computes", OneGroup, "UPDATE item SET i_data = UUID() WHERE i_id = 5", None, "UUID(), NOW(), RAND(), variables: the copies would differ"),
];

/// The table docs/sharding.md shows, from [`CONSTRUCTS`].
pub fn markdown() -> String {
    let mut out = String::from(
        "| construct | over several groups | within one group | e.g. |\n|---|---|---|---|\n",
    );
    for k in CONSTRUCTS {
        let several = match k.reach {
            Reach::Several => "runs",
            Reach::OneGroup => "refused (1235, with the reason)",
        };
        let one = match k.one {
            Some(_) => "runs",
            None => "(always several)",
        };
        let note = match k.note {
            "" => String::new(),
            n => format!(" ({n})"),
        };
        out += &format!(
            "| {}{note} | {several} | {one} | `{}` |\n",
            k.name,
            k.several.replace('|', "\\|")
        );
    }
    out
}
