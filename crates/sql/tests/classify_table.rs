//! Table-driven classification cases: statement, kind, read-only, flags.

use sextant_sql::{classify, Flags, Kind};

const NONE: Flags = Flags::empty();

#[rustfmt::skip]
fn cases() -> Vec<(&'static str, Kind, bool, Flags)> {
    vec![
        ("SELECT 1", Kind::Select, true, NONE),
        ("  select * from t where a = 'x;y'", Kind::Select, true, NONE),
        ("(SELECT a FROM t) UNION (SELECT b FROM u)", Kind::Select, true, Flags::UNSENT_ROWS),
        ("WITH c AS (SELECT 1) SELECT * FROM c", Kind::Select, true, NONE),
        ("WITH c AS (SELECT 1) UPDATE t JOIN c SET t.a=1", Kind::Select, false, NONE),
        ("VALUES (1),(2)", Kind::Select, true, NONE),
        ("SELECT * FROM t FOR UPDATE", Kind::Select, false, Flags::LOCKING_READ),
        ("select * from t for share", Kind::Select, false, Flags::LOCKING_READ),
        ("SELECT * FROM t LOCK IN SHARE MODE", Kind::Select, false, Flags::LOCKING_READ),
        ("SELECT 'FOR UPDATE' FROM t", Kind::Select, true, NONE),
        ("SELECT * FROM t -- FOR UPDATE", Kind::Select, true, NONE),
        ("SELECT a INTO OUTFILE '/tmp/x' FROM t", Kind::Select, false, Flags::INTO_FILE),
        ("SELECT a INTO @v FROM t", Kind::Select, false, Flags::USER_VAR),
        ("SELECT @v", Kind::Select, true, Flags::USER_VAR),
        ("SELECT @@session.sql_mode", Kind::Select, true, NONE),
        ("SELECT LAST_INSERT_ID()", Kind::Select, true, Flags::LAST_INSERT_ID),
        ("SELECT @@identity", Kind::Select, true, Flags::LAST_INSERT_ID),
        ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1", Kind::Select, true, Flags::FOUND_ROWS.union(Flags::LIMIT)),
        ("SELECT a FROM t ORDER BY a LIMIT 2 OFFSET 5", Kind::Select, true, Flags::LIMIT.union(Flags::UNSENT_ROWS)),
        ("SELECT a FROM t EXCEPT SELECT b FROM u", Kind::Select, true, Flags::UNSENT_ROWS),
        ("SELECT 'union', `offset` FROM t", Kind::Select, true, NONE),
        ("SELECT FOUND_ROWS()", Kind::Select, true, Flags::FOUND_ROWS.union(Flags::SESSION_INFO)),
        ("SELECT ROW_COUNT()", Kind::Select, true, Flags::ROW_COUNT.union(Flags::SESSION_INFO)),
        ("SELECT GET_LOCK('a', 1)", Kind::Select, true, Flags::NAMED_LOCK),
        ("SELECT RELEASE_LOCK('a')", Kind::Select, true, Flags::NAMED_LOCK),
        ("SELECT NEXTVAL(s)", Kind::Select, false, Flags::SEQUENCE),
        ("SELECT NEXT VALUE FOR s", Kind::Select, false, Flags::SEQUENCE),
        ("INSERT INTO t VALUES (1)", Kind::Insert, false, NONE),
        ("/* c */ UPDATE t SET a=1", Kind::Update, false, NONE),
        ("DELETE FROM t", Kind::Delete, false, NONE),
        ("REPLACE INTO t VALUES (1)", Kind::Replace, false, NONE),
        ("SET NAMES utf8mb4", Kind::Set, false, NONE),
        ("/*!40101 SET NAMES utf8 */", Kind::Set, false, NONE),
        ("SET @a = 1", Kind::Set, false, Flags::USER_VAR),
        ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", Kind::Set, false, Flags::NEXT_TRX),
        ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", Kind::Set, false, NONE),
        ("BEGIN", Kind::Begin, false, NONE),
        ("START TRANSACTION READ ONLY", Kind::Begin, false, Flags::READ_ONLY_TRX),
        ("COMMIT", Kind::Commit, false, NONE),
        ("ROLLBACK", Kind::Rollback, false, NONE),
        ("CREATE TEMPORARY TABLE t (a int)", Kind::Ddl, false, Flags::TEMP_TABLE),
        ("CREATE TABLE t (a int)", Kind::Ddl, false, NONE),
        ("LOCK TABLES t READ", Kind::Lock, false, Flags::LOCK_TABLES),
        ("UNLOCK TABLES", Kind::Unlock, false, Flags::UNLOCK_TABLES),
        ("FLUSH TABLES WITH READ LOCK", Kind::Flush, false, Flags::LOCK_TABLES),
        ("PREPARE s FROM 'SELECT 1'", Kind::Prepare, false, Flags::SQL_PREPARE),
        ("PREPARE s FROM 'SELECT \\'KILL 1\\''", Kind::Prepare, false, Flags::SQL_PREPARE),
        ("PREPARE k FROM ' /* x */ kill query 5'", Kind::Prepare, false, Flags::SQL_PREPARE.union(Flags::DYNAMIC_KILL)),
        ("EXECUTE IMMEDIATE 'KILL 12'", Kind::Execute, false, Flags::SQL_PREPARE.union(Flags::DYNAMIC_KILL)),
        ("EXECUTE IMMEDIATE \"KILL QUERY 12\"", Kind::Execute, false, Flags::SQL_PREPARE.union(Flags::DYNAMIC_KILL)),
        ("KILL 12", Kind::Kill, false, NONE),
        ("SELECT 1; KILL 123", Kind::Select, false, Flags::MULTI.union(Flags::KILL)),
        ("KILL 5; SELECT SLEEP(0.05)", Kind::Kill, false, Flags::MULTI.union(Flags::KILL)),
        ("SELECT 'KILL 5'; SELECT 2", Kind::Select, true, Flags::MULTI),
        ("HANDLER t OPEN", Kind::Handler, false, Flags::HANDLER),
        ("SHOW TABLES", Kind::Show, false, NONE),
        ("USE db1", Kind::Use, false, NONE),
        ("CREATE OR REPLACE ALGORITHM=MERGE VIEW v AS SELECT f()", Kind::Ddl, false, Flags::CATALOGUE),
        ("DROP FUNCTION IF EXISTS f", Kind::Ddl, false, Flags::CATALOGUE),
        ("RENAME TABLE v TO w", Kind::Ddl, false, Flags::CATALOGUE),
        ("CREATE TABLE t (id int)", Kind::Ddl, false, NONE),
        ("CALL p()", Kind::Call, false, NONE),
        ("SELECT 1; SELECT 2", Kind::Select, true, Flags::MULTI),
        ("SELECT 1; DELETE FROM t", Kind::Select, false, Flags::MULTI),
        ("SELECT 1;", Kind::Select, true, NONE),
        ("", Kind::Empty, false, NONE),
        // Read both ways when quotes hold a backslash or "...": the more
        // careful reading wins (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, or a
        // gbk/sjis character whose second byte is a backslash hide a call).
        ("SELECT 'a\\', my_func(), 'b'", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT 'a\\' , my_func() , '", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT \"a\\\" , my_func() , \"", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT '\u{4e2d}\\' , my_func() , '", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT \"my_func\"(1)", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT 'it\\'s'", Kind::Select, true, NONE),
        ("SELECT \"plain\" FROM t", Kind::Select, true, NONE),
        ("SELECT 'a\\' , @v := 1 , '", Kind::Select, true, Flags::USER_VAR),
        ("SELECT 'a\\' FROM t FOR UPDATE, '", Kind::Select, false, Flags::LOCKING_READ),
        ("/* only a comment */", Kind::Empty, false, NONE),
        ("frobnicate", Kind::Other, false, NONE),
        ("SELECT my_func(1)", Kind::Select, true, Flags::STORED_FUNCTION),
        ("SELECT shop.price(3)", Kind::Select, true, Flags::STORED_FUNCTION),
        // Built in to one flavor only: a stored function or UDF on the other.
        ("SELECT uuid_to_bin(@u)", Kind::Select, true, Flags::MYSQL_FUNCTION.union(Flags::USER_VAR)),
        ("SELECT COLUMN_GET(c, 1 AS int) FROM t", Kind::Select, true, Flags::MARIADB_FUNCTION),
        ("SELECT COUNT(*), MAX(a), IFNULL(b, 0), CAST(c AS CHAR(10)) FROM t WHERE d IN (1) AND EXISTS (SELECT 1)", Kind::Select, true, NONE),
        ("SELECT a FROM t JOIN u USING (id) WHERE (a, b) = ROW(1, 2)", Kind::Select, true, NONE),
        ("SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) FROM t", Kind::Select, true, NONE),
        // Compound statements are one statement, whatever they hold; what
        // they hold that reaches other sessions or sextant is marked.
        ("CREATE PROCEDURE p() BEGIN SELECT 1; KILL 5; END", Kind::Ddl, false, Flags::COMPOUND.union(Flags::INNER_KILL)),
        ("CREATE PROCEDURE p() BEGIN SET @s = 'SELECT 1'; PREPARE st FROM @s; EXECUTE st; END", Kind::Ddl, false, Flags::COMPOUND.union(Flags::INNER_DYNAMIC).union(Flags::USER_VAR)),
        ("CREATE PROCEDURE p() BEGIN EXECUTE IMMEDIATE 'SELECT 1'; END", Kind::Ddl, false, Flags::COMPOUND),
        ("CREATE PROCEDURE p() BEGIN EXECUTE IMMEDIATE 'XA RECOVER'; END", Kind::Ddl, false, Flags::COMPOUND.union(Flags::XA)),
        ("CREATE FUNCTION f() RETURNS INT BEGIN XA RECOVER; RETURN 1; END", Kind::Ddl, false, Flags::COMPOUND.union(Flags::XA).union(Flags::CATALOGUE)),
        ("CREATE PROCEDURE p() SELECT 1; KILL 5", Kind::Ddl, false, Flags::MULTI.union(Flags::KILL)),
        ("BEGIN NOT ATOMIC SELECT 1; SELECT 2; END", Kind::Begin, false, Flags::COMPOUND),
        ("IF 1 THEN XA RECOVER; END IF", Kind::Other, false, Flags::COMPOUND.union(Flags::XA)),
        ("BEGIN; SELECT 1", Kind::Begin, false, Flags::MULTI),
        ("SELECT CASE WHEN a THEN 1 END FROM t; SELECT 2", Kind::Select, true, Flags::MULTI),
        // XA anywhere but alone.
        ("XA RECOVER", Kind::Xa, false, NONE),
        ("SELECT 1; XA RECOVER", Kind::Select, false, Flags::MULTI.union(Flags::XA)),
        ("DO 1; XA ROLLBACK 'x'", Kind::Do, false, Flags::MULTI.union(Flags::XA)),
        ("EXECUTE IMMEDIATE \"XA COMMIT X'01',X'02',21336\"", Kind::Execute, false, Flags::SQL_PREPARE.union(Flags::XA)),
        ("PREPARE s FROM ' /* c */ xa recover'", Kind::Prepare, false, Flags::SQL_PREPARE.union(Flags::XA)),
        // Sextant's own schema, however it is named.
        ("DELETE FROM sextant.xa_decision", Kind::Delete, false, Flags::OWN_SCHEMA),
        ("INSERT INTO `SEXTANT` . `xa_decision` VALUES (1)", Kind::Insert, false, Flags::OWN_SCHEMA),
        ("USE sextant", Kind::Use, false, Flags::OWN_SCHEMA),
        ("USE `sextant`", Kind::Use, false, Flags::OWN_SCHEMA),
        ("DROP DATABASE sextant", Kind::Ddl, false, Flags::OWN_SCHEMA.union(Flags::CATALOGUE)),
        ("SHOW TABLES FROM sextant", Kind::Show, false, Flags::OWN_SCHEMA),
        ("CREATE TRIGGER t BEFORE INSERT ON sextant.heartbeat FOR EACH ROW SET NEW.ts_us = 0", Kind::Ddl, false, Flags::OWN_SCHEMA),
        ("PREPARE s FROM 'DELETE FROM sextant . heartbeat'", Kind::Prepare, false, Flags::SQL_PREPARE.union(Flags::OWN_SCHEMA)),
        ("EXECUTE IMMEDIATE 'SELECT ''x'', `sextant`.f()'", Kind::Execute, false, Flags::SQL_PREPARE.union(Flags::OWN_SCHEMA)),
        ("SELECT sextant FROM sextant", Kind::Select, true, NONE),
        ("SELECT 'sextant.x'", Kind::Select, true, NONE),
    ]
}

#[test]
fn classification_table() {
    let mut failures = Vec::new();
    for (sql, kind, read_only, flags) in cases() {
        let c = classify(sql.as_bytes());
        if c.kind != kind || c.read_only != read_only || c.flags != flags {
            failures.push(format!(
                "{sql:?}: got {:?} read_only={} flags={:#x}, want {:?} read_only={} flags={:#x}",
                c.kind,
                c.read_only,
                c.flags.bits(),
                kind,
                read_only,
                flags.bits()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn hints_are_collected_anywhere() {
    let c = classify(b"/*#mode=READWRITE*/ SELECT 1");
    assert_eq!(c.hints.get("mode"), Some(&b"READWRITE"[..]));
    let c = classify(b"SELECT /*# mode=READONLY */ * FROM t");
    assert_eq!(c.hints.get("mode"), Some(&b"READONLY"[..]));
    assert!(c.read_only);
    let c = classify(b"SELECT '/*#mode=READWRITE*/'");
    assert!(c.hints.is_empty());
}

#[test]
fn session_helpers() {
    assert!(classify(b"SELECT LAST_INSERT_ID()").needs_previous_connection());
    assert!(classify(b"SET @x=1").pins_session());
    assert!(classify(b"CREATE TEMPORARY TABLE t(a int)").pins_session());
    assert!(!classify(b"SELECT 1").pins_session());
}

/// A gbk session: a character whose second byte is a backslash ends
/// nothing and escapes nothing, while `'\''` elsewhere is an escaped quote.
/// Neither the default reading nor NO_BACKSLASH_ESCAPES sees the call; the
/// session's own reading does.
#[test]
fn multibyte_sessions_are_read_in_their_own_character_set() {
    use sextant_sql::{classify_in, LexMode, Multibyte};
    let sql: &[u8] = b"SELECT '\\'' , '\xbf\x5c' , my_func() , '\\''";
    let plain = classify_in(sql, || LexMode::DEFAULT);
    assert!(!plain.flags.contains(Flags::STORED_FUNCTION), "{plain:?}");
    let gbk = LexMode::of_session("STRICT_TRANS_TABLES", Some(Multibyte::Gbk));
    let c = classify_in(sql, || gbk);
    assert!(c.flags.contains(Flags::STORED_FUNCTION), "{c:?}");
    // A backtick as the second byte of a character inside `...`.
    let sql: &[u8] = b"SELECT 1 AS `\x95\x60` , my_func() , `x`";
    assert!(!classify_in(sql, || LexMode::DEFAULT)
        .flags
        .contains(Flags::STORED_FUNCTION));
    let sjis = LexMode::of_session("", Some(Multibyte::Sjis));
    assert!(classify_in(sql, || sjis)
        .flags
        .contains(Flags::STORED_FUNCTION));
    // ANSI (as a session may set it) implies ANSI_QUOTES.
    assert!(LexMode::of_session("ANSI", None).ansi_quotes);
    assert!(!LexMode::of_session("NO_BACKSLASH_ESCAPES", None).backslash_escapes);
}

#[test]
fn kill_statements_among_others_are_found() {
    use sextant_sql::{kill_spans, LexMode};
    let sql = "SELECT 'KILL 1'; KILL 123 ; /* c */ kill query 7;SELECT (1);KILL CONNECTION_ID()";
    let spans: Vec<&str> = kill_spans(sql.as_bytes(), LexMode::DEFAULT)
        .into_iter()
        .map(|r| &sql[r])
        .collect();
    assert_eq!(spans, ["KILL 123", "kill query 7", "KILL CONNECTION_ID()"]);
    assert!(kill_spans(b"SELECT 1; SELECT 2", LexMode::DEFAULT).is_empty());
}

#[test]
fn dynamic_sql_whose_text_is_not_spelt_out() {
    use sextant_sql::{dynamic_source, LexMode};
    let src = |s: &'static str| {
        dynamic_source(s.as_bytes(), LexMode::DEFAULT)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    assert_eq!(src("PREPARE k FROM @v").as_deref(), Some("@v"));
    assert_eq!(
        src("prepare k from concat('KI', 'LL ', @id)").as_deref(),
        Some("concat('KI', 'LL ', @id)")
    );
    assert_eq!(
        src("EXECUTE IMMEDIATE @s USING 1, 2").as_deref(),
        Some("@s")
    );
    assert_eq!(
        src("EXECUTE IMMEDIATE CONCAT(@a, @b)").as_deref(),
        Some("CONCAT(@a, @b)")
    );
    assert_eq!(src("PREPARE k FROM 'SELECT 1'"), None);
    assert_eq!(src("EXECUTE IMMEDIATE 'SELECT ?' USING 1"), None);
    assert_eq!(src("EXECUTE k USING @a"), None);
    assert!(sextant_sql::is_kill(b" /* x */ KILL QUERY 5"));
    assert!(!sextant_sql::is_kill(b"SELECT 'KILL'"));
}

#[test]
fn versioned_comments_are_read_the_careful_way() {
    use sextant_sql::{classify_in, LexMode, ServerVersion};
    let maria = LexMode::DEFAULT.on(ServerVersion::parse("10.11.6-MariaDB"));
    // Run by this server: a locking read.
    let c = classify_in(b"SELECT * FROM t /*M!100000 FOR UPDATE */", || maria);
    assert!(!c.read_only && c.flags.contains(Flags::LOCKING_READ));
    // Not run by it, but code to another reading: never sent to a replica.
    let c = classify_in(b"SELECT * FROM t /*!999999 FOR UPDATE */", || maria);
    assert!(!c.read_only);
    // Plain reads stay plain.
    let c = classify_in(b"SELECT * FROM t /*!999999 , 1 */", || maria);
    assert!(c.read_only);
}

/// `sql` with every number that a shape writes as `#` replaced by `with`.
fn renumbered(sql: &str, with: &str) -> String {
    let b = sql.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$';
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let joined = (start > 0 && ident(b[start - 1])) || (i < b.len() && ident(b[i]));
            out.push_str(if joined { &sql[start..i] } else { with });
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// What remembering classifications by shape rests on: statements of one
/// shape (numbers aside) classify alike, with or without a catalogue.
#[test]
fn statements_of_one_shape_classify_alike() {
    use sextant_sql::shape::{shape, Shaped};
    use sextant_sql::{Catalogue, ServerKind};
    let catalogue = Catalogue::new(
        Some(ServerKind::MariaDb),
        ["f1".to_string(), "nextid".to_string()],
        [("v1".to_string(), "SELECT f1()".to_string())],
    )
    .with_tables(["t".to_string(), "t1".to_string(), "sbtest1".to_string()]);
    let mut extra: Vec<&str> = vec![
        "SELECT c FROM sbtest1 WHERE id=5000",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 104 ORDER BY c",
        "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 5 AND 104",
        "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5 AND 104",
        "UPDATE sbtest1 SET k=k+1 WHERE id=77",
        "DELETE FROM sbtest1 WHERE id=3",
        "SELECT * FROM v1 WHERE a = 2",
        "SELECT f1(3), nextid(4) FROM t1 LIMIT 10",
        "SELECT * FROM unknown2 WHERE x=1",
        "SELECT 1.5 + 2e3, 0x10 FROM t",
        "KILL 123",
        "KILL QUERY 9; SELECT 2",
        "SET autocommit=0",
        "SET @@session.autocommit = 1",
        "SELECT @1, @@identity FROM t LIMIT 3",
        "SELECT LAST_INSERT_ID(5)",
        "SELECT SLEEP(2) FROM t FOR UPDATE",
    ];
    let cases = cases();
    extra.extend(cases.iter().map(|c| c.0));
    let mut checked = 0;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for sql in extra {
        if shape(sql.as_bytes(), &mut a) == Shaped::No {
            continue;
        }
        for with in ["0", "7", "123456789", "18446744073709551616"] {
            let other = renumbered(sql, with);
            assert_ne!(
                shape(other.as_bytes(), &mut b),
                Shaped::No,
                "{other:?} lost its shape"
            );
            assert_eq!(a, b, "{sql:?} and {other:?}");
            for (x, y) in [
                (classify(sql.as_bytes()), classify(other.as_bytes())),
                (
                    catalogue.classify(sql.as_bytes()),
                    catalogue.classify(other.as_bytes()),
                ),
            ] {
                assert_eq!(
                    (x.kind, x.flags, x.read_only),
                    (y.kind, y.flags, y.read_only),
                    "{sql:?} and {other:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} statements had a shape");
}

/// The statements with strings that OLTP traffic sends (sysbench's
/// read-write writes, an application's lookups by name) have shapes that
/// stand for them; dynamic SQL, whose string the classifier reads, does
/// not.
#[test]
fn strings_are_unread_in_single_reads_and_writes_only() {
    use sextant_sql::shape::{shape, Shaped};
    let mut out = Vec::new();
    for (sql, unread) in [
        ("UPDATE sbtest1 SET c='0931-77-1' WHERE id=5012", true),
        (
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5012, 4991, '68-99', '12-3')",
            true,
        ),
        (
            "SELECT id FROM users WHERE name = 'o''brien' FOR UPDATE",
            true,
        ),
        ("DELETE FROM t WHERE name = 'a'", true),
        ("REPLACE INTO t VALUES ('a')", true),
        ("SELECT GET_LOCK('a', 1)", true),
        ("PREPARE s FROM 'SELECT 1'", false),
        ("EXECUTE IMMEDIATE 'KILL 5'", false),
        ("SELECT 'a'; PREPARE s FROM 'KILL 5'", false),
        ("SET @v = 'a'", false),
        ("SET NAMES 'utf8mb4'", false),
        ("SHOW TABLES LIKE 'a%'", false),
        ("XA START 'x'", false),
        ("BEGIN NOT ATOMIC SELECT 'a'; END", false),
    ] {
        assert_eq!(
            shape(sql.as_bytes(), &mut out),
            Shaped::Strings,
            "{sql}: {}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(classify(sql.as_bytes()).strings_unread(), unread, "{sql}");
    }
}
