//! `SHOW QUERY DIGESTS` and `RESET QUERY DIGESTS`: statements grouped by
//! their digest (values replaced by `?`), with counts and times. Each
//! worker thread keeps its own (no lock on the statement path); the proxy
//! gathers them and [`table`] merges and formats.

use super::{AdminCommand, Query};
use crate::{Answer, Context, Table};

/// One digest as one thread counted it.
#[derive(Debug, Clone, Default)]
pub struct DigestRow {
    pub hash: u64,
    pub text: String,
    pub count: u64,
    pub errors: u64,
    pub rows: u64,
    pub sum_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    /// Statements by response time, bucket i up to BUCKETS_US[i].
    pub buckets: [u64; BUCKETS_US.len() + 1],
    /// Where they ran: the primary, a replica, elsewhere (answered by
    /// sextant itself, or over several groups).
    pub primary: u64,
    pub replica: u64,
    pub other: u64,
}

/// Upper bounds of the response-time buckets of a digest, microseconds.
pub const BUCKETS_US: [u64; 15] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000, 30_000_000,
];

impl DigestRow {
    pub fn merge(&mut self, o: &DigestRow) {
        if self.count == 0 {
            self.min_us = o.min_us;
        } else if o.count > 0 {
            self.min_us = self.min_us.min(o.min_us);
        }
        self.count += o.count;
        self.errors += o.errors;
        self.rows += o.rows;
        self.sum_us += o.sum_us;
        self.max_us = self.max_us.max(o.max_us);
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.primary += o.primary;
        self.replica += o.replica;
        self.other += o.other;
    }

    /// The response time 99% of the statements were within (the upper
    /// bound of the bucket that holds the 99th percentile, capped by the
    /// slowest seen).
    pub fn p99_us(&self) -> u64 {
        let want = (self.count * 99).div_ceil(100);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want && *n > 0 {
                return BUCKETS_US
                    .get(i)
                    .copied()
                    .unwrap_or(u64::MAX)
                    .min(self.max_us);
            }
        }
        self.max_us
    }
}

pub struct ShowDigests;

impl AdminCommand for ShowDigests {
    fn syntax(&self) -> &'static str {
        "SHOW QUERY DIGESTS"
    }
    fn help(&self) -> &'static str {
        "statements by digest (values as ?): count, total/min/max/p99 time, rows, errors, where they ran; busiest first"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["SHOW", "QUERY", "DIGESTS"])
            .then_some(Answer::ShowDigests)
    }
}

pub struct ResetDigests;

impl AdminCommand for ResetDigests {
    fn syntax(&self) -> &'static str {
        "RESET QUERY DIGESTS"
    }
    fn help(&self) -> &'static str {
        "forgets the digests counted so far"
    }
    fn run(&self, q: &Query<'_>, _: &Context<'_>) -> Option<Answer> {
        q.is(&["RESET", "QUERY", "DIGESTS"])
            .then_some(Answer::ResetDigests)
    }
}

/// Merges the threads' rows by digest and formats them, by total time.
pub fn table(rows: Vec<DigestRow>) -> Table {
    let mut merged: std::collections::HashMap<u64, DigestRow> = Default::default();
    for r in rows {
        merged
            .entry(r.hash)
            .or_insert_with(|| DigestRow {
                hash: r.hash,
                text: r.text.clone(),
                ..Default::default()
            })
            .merge(&r);
    }
    let mut all: Vec<DigestRow> = merged.into_values().collect();
    all.sort_by(|a, b| b.sum_us.cmp(&a.sum_us).then(b.count.cmp(&a.count)));
    let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
    Table {
        columns: [
            "digest",
            "digest_text",
            "count",
            "total_ms",
            "min_ms",
            "max_ms",
            "p99_ms",
            "rows",
            "errors",
            "primary",
            "replica",
            "other",
        ]
        .map(String::from)
        .to_vec(),
        rows: all
            .iter()
            .map(|d| {
                vec![
                    Some(format!("{:016x}", d.hash)),
                    Some(d.text.clone()),
                    Some(d.count.to_string()),
                    Some(ms(d.sum_us)),
                    Some(ms(d.min_us)),
                    Some(ms(d.max_us)),
                    Some(ms(d.p99_us())),
                    Some(d.rows.to_string()),
                    Some(d.errors.to_string()),
                    Some(d.primary.to_string()),
                    Some(d.replica.to_string()),
                    Some(d.other.to_string()),
                ]
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_merge_and_p99_comes_from_the_buckets() {
        let mut a = DigestRow {
            hash: 1,
            text: "SELECT ?".into(),
            ..Default::default()
        };
        for us in (0..98).map(|_| 80).chain([3_000, 40_000]) {
            a.count += 1;
            a.sum_us += us;
            a.max_us = a.max_us.max(us);
            a.min_us = if a.count == 1 { us } else { a.min_us.min(us) };
            a.buckets[BUCKETS_US.partition_point(|&b| b < us)] += 1;
        }
        assert_eq!(
            a.p99_us(),
            5_000,
            "the 99th of 100 is the 3 ms one: bucket <= 5 ms"
        );
        let mut b = a.clone();
        b.min_us = 50;
        let t = table(vec![a, b]);
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0][2].as_deref(), Some("200"));
        assert_eq!(t.rows[0][4].as_deref(), Some("0.050"));
        assert_eq!(t.rows[0][5].as_deref(), Some("40.000"));
    }
}
