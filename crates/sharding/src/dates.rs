//! Dates of range partitions (Cetus's date and datetime keys), as seconds
//! since the epoch (UTC) and back.

/// Seconds since the epoch (UTC) of `YYYY-MM-DD` or `YYYY-MM-DD hh:mm:ss`.
pub fn epoch(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = match s.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let secs = match time {
        None => 0,
        Some(t) => {
            let mut p = t.split(':').map(|p| p.parse::<i64>().ok());
            let (h, mi, sec) = (p.next()??, p.next()??, p.next().unwrap_or(Some(0))?);
            if h > 23 || mi > 59 || sec > 59 {
                return None;
            }
            h * 3600 + mi * 60 + sec
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146097 + doe - 719468) * 86400 + secs)
}

/// `YYYY-MM-DD hh:mm:ss` (UTC) of seconds since the epoch.
pub fn datetime(epoch: i64) -> String {
    let (days, secs) = (epoch.div_euclid(86400), epoch.rem_euclid(86400));
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        for t in [
            "1970-01-01 00:00:00",
            "2000-02-29 23:59:59",
            "2024-06-30 12:00:00",
            "1969-12-31 23:59:59",
        ] {
            assert_eq!(datetime(epoch(t).unwrap()), t);
        }
        assert_eq!(epoch("1970-01-01"), Some(0));
        assert_eq!(epoch("2000-03-01 00:00:01"), Some(951868801));
        assert_eq!(epoch("2017-13-01"), None);
        assert_eq!(epoch("yesterday"), None);
    }
}
