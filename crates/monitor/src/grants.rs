//! What a server account can reach beyond its own schemas, read from its
//! `SHOW GRANTS`: sextant's own tables (the `sextant` schema), or other
//! sessions (SUPER, CONNECTION ADMIN, READ_ONLY ADMIN: killing any
//! connection, writing through read_only). An application account should
//! reach neither; sextant reports one that does. Pure: the proxy reads the
//! grants and shows what this finds.

/// The schema holding sextant's own tables.
const OWN_SCHEMA: &str = "sextant";

/// Privileges that change a schema's tables (or let a missing one be
/// made up).
const WRITES: &[&str] = &[
    "ALL",
    "ALL PRIVILEGES",
    "INSERT",
    "UPDATE",
    "DELETE",
    "DELETE HISTORY",
    "DROP",
    "ALTER",
    "CREATE",
    "INDEX",
    "TRIGGER",
];

/// Privileges over other sessions and the server itself.
const ADMIN: &[&str] = &[
    "SUPER",
    "CONNECTION ADMIN",
    "READ_ONLY ADMIN",
    "BINLOG ADMIN",
    "REPLICATION MASTER ADMIN",
    "FEDERATED ADMIN",
];

/// Each thing the account's grants let it reach that an application
/// account should not, as a sentence; empty when it holds its own
/// schemas only.
pub fn reach(grants: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for g in grants {
        let Some((privileges, object)) = parse(g) else {
            continue;
        };
        let has = |set: &[&str]| -> Vec<String> {
            privileges
                .iter()
                .filter(|p| set.iter().any(|s| p.eq_ignore_ascii_case(s)))
                .cloned()
                .collect()
        };
        let all = !has(&["ALL", "ALL PRIVILEGES"]).is_empty();
        let writes = has(WRITES);
        match &object {
            Object::Global => {
                if !writes.is_empty() {
                    out.push(format!(
                        "can write sextant's own tables ({} ON *.*)",
                        writes.join(", ")
                    ));
                }
                let admin = match all {
                    true => vec!["ALL PRIVILEGES".to_string()],
                    false => has(ADMIN),
                };
                if !admin.is_empty() {
                    out.push(format!(
                        "can end or outlast other sessions ({} ON *.*: KILL of any connection, writes through read_only)",
                        admin.join(", ")
                    ));
                }
            }
            Object::Schema(pattern) if !writes.is_empty() && like(pattern, OWN_SCHEMA) => {
                out.push(format!(
                    "can write sextant's own tables ({} ON `{}`)",
                    writes.join(", "),
                    pattern
                ));
            }
            _ => {}
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Object {
    Global,
    /// A schema (or a table of it): its name as granted, a LIKE pattern.
    Schema(String),
    /// A routine, a proxy grant, a role: reaches nothing here.
    Other,
}

/// `GRANT <privileges> ON <object> TO ...` as privileges and object.
fn parse(line: &str) -> Option<(Vec<String>, Object)> {
    let rest = strip_word(line.trim(), "GRANT")?;
    let on = find_word(rest, "ON")?;
    let privileges = split_privileges(&rest[..on]);
    let object = rest[on + 2..].trim_start();
    let to = find_word(object, "TO").unwrap_or(object.len());
    let object = object[..to].trim();
    let object = if strip_word(object, "PROCEDURE").is_some()
        || strip_word(object, "FUNCTION").is_some()
        || strip_word(object, "PACKAGE").is_some()
    {
        Object::Other
    } else if object == "*.*" {
        Object::Global
    } else if object == "*" {
        // The default database's: unknown here, taken as any.
        Object::Schema("%".into())
    } else {
        match schema_name(object) {
            Some(s) => Object::Schema(s),
            None => Object::Other,
        }
    };
    Some((privileges, object))
}

/// The schema part of `db.*`, `` `db`.`t` ``, unquoted.
fn schema_name(object: &str) -> Option<String> {
    let (name, _) = match object.strip_prefix('`') {
        Some(q) => {
            let mut name = String::new();
            let mut chars = q.char_indices().peekable();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                if c == '`' {
                    if chars.peek().map(|p| p.1) == Some('`') {
                        name.push('`');
                        chars.next();
                        continue;
                    }
                    end = Some(i + 1);
                    break;
                }
                name.push(c);
            }
            (name, &q[end?..])
        }
        None => {
            let dot = object.find('.')?;
            (object[..dot].to_string(), &object[dot..])
        }
    };
    Some(name)
}

/// Privileges separated by commas outside column lists, upper-cased and
/// without their columns.
fn split_privileges(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_ascii_uppercase());
                cur.clear();
            }
            _ if depth == 0 => cur.push(c),
            _ => {}
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_ascii_uppercase());
    }
    out
}

fn strip_word<'a>(s: &'a str, w: &str) -> Option<&'a str> {
    let head = s.get(..w.len())?;
    let rest = &s[w.len()..];
    (head.eq_ignore_ascii_case(w) && rest.starts_with(' ')).then(|| rest.trim_start())
}

/// Where ` w ` stands in `s` (outside backquotes), at its first letter.
fn find_word(s: &str, w: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut quoted = false;
    for i in 0..b.len() {
        if b[i] == b'`' {
            quoted = !quoted;
            continue;
        }
        if quoted || i == 0 || b[i - 1] != b' ' {
            continue;
        }
        let end = i + w.len();
        if end < b.len() && b[end] == b' ' && s[i..end].eq_ignore_ascii_case(w) {
            return Some(i);
        }
    }
    None
}

/// Whether a schema grant's name, a LIKE pattern (`%`, `_`, `\` escapes),
/// covers `name`.
fn like(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some(b'%') => (0..=n.len()).any(|k| go(&p[1..], &n[k..])),
            Some(b'_') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some(b'\\') if p.len() > 1 => {
                n.first().is_some_and(|c| c.eq_ignore_ascii_case(&p[1])) && go(&p[2..], &n[1..])
            }
            Some(c) => n.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && go(&p[1..], &n[1..]),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn what_grants_reach() {
        let cases: &[(&str, &[&str])] = &[
            ("GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*A4B6'", &[]),
            ("GRANT ALL PRIVILEGES ON `shop`.* TO `app`@`%`", &[]),
            ("GRANT SELECT, INSERT, UPDATE ON `shop\\_%`.* TO `app`@`%`", &[]),
            ("GRANT ALL PRIVILEGES ON *.* TO `app`@`%` WITH GRANT OPTION", &["can write sextant's own tables (ALL PRIVILEGES ON *.*)", "can end or outlast other sessions (ALL PRIVILEGES ON *.*"]),
            ("GRANT SELECT, SUPER ON *.* TO `ops`@`%`", &["can end or outlast other sessions (SUPER ON *.*"]),
            ("GRANT CONNECTION ADMIN, READ_ONLY ADMIN ON *.* TO `a`@`%`", &["can end or outlast other sessions (CONNECTION ADMIN, READ_ONLY ADMIN ON *.*"]),
            ("GRANT SELECT ON *.* TO `reader`@`%`", &[]),
            ("GRANT INSERT ON `sextant`.`xa_decision` TO `app`@`%`", &["can write sextant's own tables (INSERT ON `sextant`)"]),
            ("GRANT SELECT ON `sextant`.* TO `app`@`%`", &[]),
            ("GRANT ALL PRIVILEGES ON `sext%`.* TO `app`@`%`", &["can write sextant's own tables (ALL PRIVILEGES ON `sext%`)"]),
            ("GRANT ALL PRIVILEGES ON `sextant\\_%`.* TO `app`@`%`", &[]),
            ("GRANT DELETE ON sextant.* TO 'app'@'%'", &["can write sextant's own tables (DELETE ON `sextant`)"]),
            ("GRANT SELECT (a, b), INSERT (a) ON `t1`.`x` TO `app`@`%`", &[]),
            ("GRANT EXECUTE ON PROCEDURE `sextant`.`p` TO `app`@`%`", &[]),
            ("GRANT `app_role` TO `app`@`%`", &[]),
            ("GRANT PROXY ON ''@'%' TO 'app'@'%'", &[]),
        ];
        let mut wrong = Vec::new();
        for (g, want) in cases {
            let got = reach(&[g.to_string()]);
            let ok = got.len() == want.len() && got.iter().zip(*want).all(|(g, w)| g.starts_with(w));
            if !ok {
                wrong.push(format!("{g}\n  got {got:?}\n  want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
