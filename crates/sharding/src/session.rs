//! Which of a session's settings a read over several groups models.
//!
//! Every group runs the statement under the session's settings, and sextant
//! combines their rows. A setting that changes what one server would answer
//! for the whole (a row limit applied per group, a precision sextant does
//! not compute with, a grouping rule) would make the combined answer
//! differ from one server's. So the rule is default deny: a setting the
//! session changed is fine only if it is listed here as one that changes
//! nothing a merge computes, or is at the value the merge assumes.

/// Settings whose effect each group applies exactly as one server would
/// (character sets, time zone, locks and timeouts, plans, what a write
/// checks), or that the merge does not depend on.
const NEUTRAL: &[&str] = &[
    "autocommit",
    "big_tables",
    "character_set_client",
    "character_set_connection",
    "character_set_database",
    "character_set_results",
    "character_set_server",
    "collation_connection",
    "collation_database",
    "collation_server",
    "default_storage_engine",
    "default_tmp_storage_engine",
    "default_week_format",
    "enforce_storage_engine",
    "eq_range_index_dive_limit",
    "explicit_defaults_for_timestamp",
    "foreign_key_checks",
    "idle_transaction_timeout",
    "idle_readonly_transaction_timeout",
    "idle_write_transaction_timeout",
    "in_predicate_conversion_threshold",
    "innodb_lock_wait_timeout",
    "innodb_strict_mode",
    "join_buffer_size",
    "join_cache_level",
    "lc_messages",
    "lc_time_names",
    "lock_wait_timeout",
    "long_query_time",
    "low_priority_updates",
    "max_execution_time",
    "max_heap_table_size",
    "max_statement_time",
    "net_buffer_length",
    "old_mode",
    "optimizer_prune_level",
    "optimizer_search_depth",
    "optimizer_switch",
    "optimizer_use_condition_selectivity",
    "profiling",
    "query_cache_type",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "session_track_gtids",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
    "skip_replication",
    "sort_buffer_size",
    "sql_big_selects",
    "sql_buffer_result",
    "sql_log_bin",
    "sql_log_off",
    "sql_notes",
    "sql_quote_show_create",
    "sql_safe_updates",
    "sql_warnings",
    "time_zone",
    "timestamp",
    "tmp_disk_table_size",
    "tmp_memory_table_size",
    "tmp_table_size",
    "transaction_isolation",
    "transaction_read_only",
    "tx_isolation",
    "tx_read_only",
    "unique_checks",
    "use_stat_tables",
];

/// Settings the merge assumes at one value (the servers' default): at it
/// they change nothing; at any other value they would.
const AT_DEFAULT: &[(&str, &str)] = &[
    ("sql_select_limit", "18446744073709551615"),
    ("div_precision_increment", "4"),
    ("max_sort_length", "1024"),
    ("group_concat_max_len", "1048576"),
    ("sql_auto_is_null", "0"),
    ("sql_auto_is_null", "OFF"),
    ("auto_increment_increment", "1"),
    ("auto_increment_offset", "1"),
    ("completion_type", "NO_CHAIN"),
    ("completion_type", "0"),
];

/// `sql_mode` flags each group applies exactly as one server: they reject
/// values, or change how a statement is read in ways sextant's own reader
/// follows (quotes and escapes).
const NEUTRAL_MODES: &[&str] = &[
    "",
    "ALLOW_INVALID_DATES",
    "ANSI_QUOTES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "IGNORE_BAD_TABLE_OPTIONS",
    "IGNORE_SPACE",
    "NO_AUTO_CREATE_USER",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "NO_DIR_IN_CREATE",
    "NO_ENGINE_SUBSTITUTION",
    "NO_FIELD_OPTIONS",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_ZERO_DATE",
    "NO_ZERO_IN_DATE",
    "ONLY_FULL_GROUP_BY",
    "STRICT_ALL_TABLES",
    "STRICT_TRANS_TABLES",
    "TRADITIONAL",
];

/// The first setting of the session (lower-case names, values as session
/// tracking reported them) that a read over several groups does not model,
/// as a refusal naming it; None when every one is modelled.
pub fn unmodelled_setting<'a>(
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<String> {
    for (name, value) in vars {
        if NEUTRAL.contains(&name) {
            continue;
        }
        if name == "sql_mode" {
            let flag = value
                .split(',')
                .map(str::trim)
                .find(|f| !NEUTRAL_MODES.iter().any(|m| m.eq_ignore_ascii_case(f)));
            match flag {
                None => continue,
                Some(f) => {
                    return Some(format!(
                        "the session's sql_mode flag {f}: it changes how a value is computed or compared, and each group would apply it to its own rows where sextant's merge does not; remove it from sql_mode for this statement, or restrict it by the shard key to one group"
                    ))
                }
            }
        }
        let defaults: Vec<&str> = AT_DEFAULT
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .collect();
        if defaults.iter().any(|d| d.eq_ignore_ascii_case(value)) {
            continue;
        }
        let why = match defaults.first() {
            Some(d) => format!(
                "the session's {name} = {value}: each group would apply it to its own rows, and sextant's merge assumes {d}; SET {name} = DEFAULT first, or restrict the statement by the shard key to one group"
            ),
            None => format!(
                "the session's {name} = {value}: a setting sextant does not know to leave a merged result unchanged; SET {name} = DEFAULT first, or restrict the statement by the shard key to one group"
            ),
        };
        return Some(why);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::unmodelled_setting;

    type Case = (
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    );

    #[test]
    fn settings_are_refused_unless_known_to_change_nothing() {
        let cases: &[Case] = &[
            (&[], None),
            (&[("autocommit", "OFF"), ("time_zone", "+02:00")], None),
            (&[("character_set_results", "")], None),
            (&[("sql_select_limit", "18446744073709551615")], None),
            (&[("sql_select_limit", "3")], Some("sql_select_limit = 3")),
            (&[("div_precision_increment", "0")], Some("assumes 4")),
            (&[("div_precision_increment", "4")], None),
            (
                &[("group_concat_max_len", "10")],
                Some("group_concat_max_len"),
            ),
            (&[("max_sort_length", "4")], Some("max_sort_length")),
            (
                &[("sql_mode", "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION")],
                None,
            ),
            (
                &[("sql_mode", "STRICT_TRANS_TABLES,PIPES_AS_CONCAT")],
                Some("flag PIPES_AS_CONCAT"),
            ),
            (&[("sql_mode", "PAD_CHAR_TO_FULL_LENGTH")], Some("PAD_CHAR")),
            (&[("sql_mode", "")], None),
            (&[("some_new_variable", "1")], Some("does not know")),
            (&[("sql_auto_is_null", "ON")], Some("sql_auto_is_null")),
        ];
        for (vars, want) in cases {
            let got = unmodelled_setting(vars.iter().copied());
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.contains(w), "{vars:?}: {g}"),
                _ => panic!("{vars:?}: {got:?}"),
            }
        }
    }
}
