//! `[sharding]` in sextant's config: Cetus's own file named by
//! `cetus_file`, or the same layout written in the TOML; both checked
//! against the groups the config defines.

use sextant_config::{Config, ConfigError};
use std::path::Path;

const GROUPS: &str = r#"
[proxy]
default_group = "data1"
[[users]]
name = "app"
password = "pw"
[groups.data1]
primary = "127.0.0.1:3306"
[groups.data2]
primary = "127.0.0.1:3316"
[groups.data3]
primary = "127.0.0.1:3326"
[groups.data4]
primary = "127.0.0.1:3336"
"#;

const NATIVE: &str = r#"
[sharding]
unlisted = "default_group"

[[sharding.vdb]]
id = 1
type = "int"
method = "hash"
num = 4
partitions = { data1 = [0], data2 = [1], data3 = [2], data4 = [3] }

[[sharding.table]]
vdb = 1
db = "tpcc_shard"
table = "warehouse"
pkey = "w_id"

[[sharding.table]]
vdb = 1
db = "tpcc_shard"
table = "district"
pkey = "d_w_id"

[sharding.default]
tpcc_shard = "data4"

[sharding.all]
tpcc_shard = ["data1", "data2", "data3", "data4"]
"#;

fn part_json() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sharding/tests/golden/part.json")
}

#[test]
fn native_and_cetus_forms_give_the_same_placements() {
    let native = Config::parse(&format!("{GROUPS}{NATIVE}"), "native.toml").unwrap();
    let layout = native.layout.as_ref().expect("a layout");
    let dir = std::env::temp_dir().join(format!("sextant-sharding-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(part_json(), dir.join("part.json")).unwrap();
    let file = dir.join("sextant.toml");
    let text = format!("{GROUPS}\n[sharding]\ncetus_file = \"part.json\"\n");
    std::fs::write(&file, &text).unwrap();
    let cetus = Config::load(&file).unwrap();
    let from_file = cetus.layout.as_ref().expect("a layout");
    for (db, t) in [
        ("tpcc_shard", "warehouse"),
        ("tpcc_shard", "district"),
        ("tpcc_shard", "item"),
    ] {
        assert_eq!(layout.placement(db, t), from_file.placement(db, t), "{t}");
    }
    assert_eq!(layout.vdbs, from_file.vdbs);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_layouts_in_the_config() {
    let err = |text: &str| -> String {
        match Config::parse(text, "s.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    };
    // A group the config does not define.
    let only_three = GROUPS.replace("[groups.data4]\nprimary = \"127.0.0.1:3336\"\n", "");
    let e = err(&format!("{only_three}{NATIVE}"));
    assert!(
        e.contains("sharding") && e.contains("data4") && e.contains("does not define"),
        "{e}"
    );
    // A slot in no group, with the TOML line of the partitions.
    let holes = NATIVE.replace("data4 = [3]", "data4 = [2]");
    let e = err(&format!("{GROUPS}{holes}"));
    let line = format!("{GROUPS}{holes}")
        .lines()
        .position(|l| l.starts_with("partitions"))
        .unwrap()
        + 1;
    assert!(
        e.contains(&format!("s.toml:{line}: sharding.vdb[0].partitions"))
            && e.contains("slot 2 is in both"),
        "{e} (line {line})"
    );
    // Both forms at once.
    let both = NATIVE.replace("[sharding]\n", "[sharding]\ncetus_file = \"x.json\"\n");
    let e = err(&format!("{GROUPS}{both}"));
    assert!(e.contains("either in cetus_file or here"), "{e}");
    // A Cetus file that is not there, or not JSON.
    let e = err(&format!(
        "{GROUPS}[sharding]\ncetus_file = \"/nonexistent/part.json\"\n"
    ));
    assert!(
        e.contains("/nonexistent/part.json") && e.contains("cannot read"),
        "{e}"
    );
    assert!(matches!(
        Config::parse(
            &format!("{GROUPS}[sharding]\nunlisted = \"everywhere\"\n"),
            "s.toml"
        ),
        Err(ConfigError::Parse { .. })
    ));
}

#[test]
fn sequences_name_tables_of_the_layout() {
    let seq = |table: &str, block: u64| {
        format!(
            "\n[[sharding.sequence]]\ndb = \"tpcc_shard\"\ntable = \"{table}\"\ncolumn = \"Id\"\nblock = {block}\n"
        )
    };
    let ok = Config::parse(
        &format!("{GROUPS}{NATIVE}{}", seq("warehouse", 50)),
        "s.toml",
    )
    .unwrap();
    let layout = ok.layout.unwrap();
    let s = layout.sequence("TPCC_SHARD", "warehouse").unwrap();
    assert_eq!((s.column.as_str(), s.block), ("id", 50));
    // The counter lives in the database's default group.
    assert_eq!(
        layout.sequence_group("tpcc_shard"),
        layout.group_index("data4")
    );
    assert!(layout.explain().contains(
        "table tpcc_shard.warehouse: id given by a sequence (blocks of 50, counter in data4)"
    ));
    let err = |text: String| match Config::parse(&text, "s.toml") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted: {text}"),
    };
    // A table the layout does not place, a block of 0, a table twice.
    let other = seq("t", 10).replace("tpcc_shard", "otherdb");
    let e = err(format!("{GROUPS}{NATIVE}{other}"));
    assert!(
        e.contains("sharding.sequence[0]") && e.contains("not a sharded or single table"),
        "{e}"
    );
    let e = err(format!("{GROUPS}{NATIVE}{}", seq("warehouse", 0)));
    assert!(e.contains("a block of at least 1"), "{e}");
    let e = err(format!(
        "{GROUPS}{NATIVE}{}{}",
        seq("warehouse", 5),
        seq("warehouse", 6)
    ));
    assert!(
        e.contains("sharding.sequence[1]") && e.contains("two sequences"),
        "{e}"
    );
}
