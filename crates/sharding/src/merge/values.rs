//! Values of result rows and how the server compares them: cells of a
//! text row, numbers exactly (decimals as scaled integers), strings by
//! their collation weights.

use std::cmp::Ordering;

/// How values of a column compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Int,
    Decimal,
    Float,
    /// DATE, DATETIME, TIMESTAMP, YEAR, binary strings: their text sorts
    /// as they do.
    Bytes,
    Time,
    /// Strings in a collation: by their WEIGHT_STRING columns.
    Weight,
}

impl ValueKind {
    /// The kind of a column from its definition's type, flags and
    /// character set, or why its values cannot be merged on.
    pub fn of(ty: u8, flags: u16, charset: u16) -> Result<ValueKind, String> {
        const ENUM: u16 = 0x100;
        const SET: u16 = 0x800;
        if flags & (ENUM | SET) != 0 {
            return Err("an ENUM or SET column (the server orders those by their index)".into());
        }
        Ok(match ty {
            1 | 2 | 3 | 8 | 9 | 13 => ValueKind::Int,
            0 | 246 => ValueKind::Decimal,
            4 | 5 => ValueKind::Float,
            6 | 7 | 10 | 12 | 14 | 16 | 17 | 18 => ValueKind::Bytes,
            11 | 19 => ValueKind::Time,
            _ if charset == 63 => ValueKind::Bytes,
            _ => ValueKind::Weight,
        })
    }

    pub(super) fn numeric(self) -> bool {
        matches!(self, ValueKind::Int | ValueKind::Decimal)
    }
}

/// What the merge needs to know of one column of the groups' rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub kind: Result<ValueKind, String>,
    /// Digits after the point (of a DECIMAL).
    pub decimals: u8,
}

/// A row of the text protocol with its cells found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub bytes: Vec<u8>,
    cells: Vec<Option<(usize, usize)>>,
}

impl Row {
    /// The row's first `n` cells, or None when it does not read as `n`
    /// text-protocol cells.
    pub fn new(bytes: Vec<u8>, n: usize) -> Option<Row> {
        let cells = cells(&bytes, n)?;
        Some(Row { bytes, cells })
    }

    pub fn cell(&self, i: usize) -> Option<&[u8]> {
        self.cells
            .get(i)
            .copied()
            .flatten()
            .map(|(a, z)| &self.bytes[a..z])
    }

    /// Where the first `n` cells end (the rest are hidden columns).
    pub fn visible_end(&self, n: usize) -> usize {
        match n.checked_sub(1).and_then(|i| self.cells.get(i)) {
            None => 0,
            Some(Some((_, z))) => *z,
            // A NULL is one byte: the next cell's start, less its length
            // prefix, is not known here; count the bytes instead.
            Some(None) => {
                let mut end = 0;
                for c in &self.cells[..n] {
                    end = match c {
                        Some((_, z)) => *z,
                        None => end + 1,
                    };
                }
                end
            }
        }
    }
}

/// Offsets of a text-protocol row's cells (None: NULL).
pub fn cells(row: &[u8], n: usize) -> Option<Vec<Option<(usize, usize)>>> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    for _ in 0..n {
        let (len, head) = match *row.get(i)? {
            0xfb => {
                out.push(None);
                i += 1;
                continue;
            }
            b @ 0..=0xfa => (b as usize, 1),
            0xfc => (
                u16::from_le_bytes([*row.get(i + 1)?, *row.get(i + 2)?]) as usize,
                3,
            ),
            0xfd => (
                u32::from_le_bytes([*row.get(i + 1)?, *row.get(i + 2)?, *row.get(i + 3)?, 0])
                    as usize,
                4,
            ),
            0xfe => (
                u64::from_le_bytes(row.get(i + 1..i + 9)?.try_into().ok()?) as usize,
                9,
            ),
            _ => return None,
        };
        let start = i + head;
        let end = start.checked_add(len).filter(|e| *e <= row.len())?;
        out.push(Some((start, end)));
        i = end;
    }
    Some(out)
}

/// Compares one column's values of two rows, ascending, NULL first (as
/// MySQL sorts). `at`: the value's column; for strings its two weight
/// columns follow it.
pub fn compare_at(kind: ValueKind, a: &Row, b: &Row, at: usize) -> Ordering {
    match kind {
        ValueKind::Weight => match (a.cell(at), b.cell(at)) {
            (None, None) => Ordering::Equal,
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            _ => weight_compare(
                a.cell(at + 1).unwrap_or_default(),
                a.cell(at + 2).unwrap_or_default(),
                b.cell(at + 1).unwrap_or_default(),
            ),
        },
        k => compare(k, a.cell(at), b.cell(at)),
    }
}

/// Compares two strings' weights (`wa` with `padded`, the weight of `a`
/// with a space appended, which gives a space's weight).
pub(super) fn weight_compare(wa: &[u8], padded: &[u8], wb: &[u8]) -> Ordering {
    let space = padded.strip_prefix(wa).unwrap_or_default();
    pad_compare(wa, wb, space)
}

/// Compares two values of one kind, ascending, NULL first. Strings
/// (`Weight`) compare here by their bytes: callers with weights use
/// [`compare_at`].
pub fn compare(kind: ValueKind, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, _) => return Ordering::Less,
        (_, None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a, b),
    };
    let text = |v: &[u8]| std::str::from_utf8(v).unwrap_or("").trim().to_string();
    match kind {
        ValueKind::Int => {
            let p = |v: &[u8]| text(v).parse::<i128>().unwrap_or(0);
            p(a).cmp(&p(b))
        }
        ValueKind::Float => {
            let p = |v: &[u8]| text(v).parse::<f64>().unwrap_or(0.0);
            p(a).total_cmp(&p(b))
        }
        ValueKind::Decimal => decimal_cmp(&text(a), &text(b)),
        ValueKind::Time => {
            let secs = |v: &[u8]| {
                let t = text(v);
                let (neg, t) = match t.strip_prefix('-') {
                    Some(r) => (true, r.to_string()),
                    None => (false, t),
                };
                let mut parts = t.split(':');
                let h: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let m: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let s: f64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let v = h * 3600.0 + m * 60.0 + s;
                if neg {
                    -v
                } else {
                    v
                }
            };
            secs(a).total_cmp(&secs(b))
        }
        ValueKind::Bytes | ValueKind::Weight => a.cmp(b),
    }
}

/// Compares collation weights as the server compares strings with PAD
/// SPACE: the shorter as if followed by spaces (`space`: a space's
/// weight).
pub fn pad_compare(a: &[u8], b: &[u8], space: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        o => return o,
    }
    let (rest, flip) = match a.len().cmp(&b.len()) {
        Ordering::Equal => return Ordering::Equal,
        Ordering::Greater => (&a[common..], false),
        Ordering::Less => (&b[common..], true),
    };
    // The longer one's remainder against spaces.
    let o = if space.is_empty() {
        Ordering::Greater
    } else {
        rest.chunks(space.len())
            .map(|ch| ch.cmp(&space[..ch.len()]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    if flip {
        o.reverse()
    } else {
        o
    }
}

/// Exact comparison of two decimal numbers written out (`-12.50`, `3`).
pub fn decimal_cmp(a: &str, b: &str) -> Ordering {
    let split = |s: &str| {
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let int = int.trim_start_matches('0').to_string();
        let frac = frac.trim_end_matches('0').to_string();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    };
    let (na, ia, fa) = split(a);
    let (nb, ib, fb) = split(b);
    let magnitude = ia
        .len()
        .cmp(&ib.len())
        .then_with(|| ia.cmp(&ib))
        .then_with(|| fa.cmp(&fb));
    match (na, nb) {
        (false, false) => magnitude,
        (true, true) => magnitude.reverse(),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
    }
}

/// A decimal number written out, as an integer and its scale.
pub(super) fn decimal_parse(v: &[u8]) -> Option<(i128, u32)> {
    let t = std::str::from_utf8(v).ok()?.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let m: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some((if neg { -m } else { m }, frac.len() as u32))
}

pub(super) fn decimal_format(m: i128, scale: u32) -> Vec<u8> {
    let digits = m.unsigned_abs().to_string();
    let scale = scale as usize;
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let mut out = String::new();
    if m < 0 {
        out.push('-');
    }
    out.push_str(int);
    if scale > 0 {
        out.push('.');
        out.push_str(frac);
    }
    out.into_bytes()
}

/// The exact sum of two decimal numbers written out (`-12.50`, `3`), in
/// the larger scale of the two; None beyond 38 digits.
pub fn decimal_add(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let ((x, sx), (y, sy)) = (decimal_parse(a)?, decimal_parse(b)?);
    let scale = sx.max(sy);
    let x = x.checked_mul(10i128.checked_pow(scale - sx)?)?;
    let y = y.checked_mul(10i128.checked_pow(scale - sy)?)?;
    Some(decimal_format(x.checked_add(y)?, scale))
}

/// `sum / count` to `scale` digits after the point, rounded half away
/// from zero (as the server rounds a DECIMAL quotient); None beyond 38
/// digits or for a zero count.
pub fn decimal_div(sum: &[u8], count: &[u8], scale: u32) -> Option<Vec<u8>> {
    let (m, s) = decimal_parse(sum)?;
    let (c, cs) = decimal_parse(count)?;
    if c <= 0 || cs != 0 {
        return None;
    }
    // m / 10^s / c at `scale` digits: m * 10^(scale - s) / c.
    let (n, d) = match scale.checked_sub(s) {
        Some(up) => (m.checked_mul(10i128.checked_pow(up)?)?, c),
        None => (m, c.checked_mul(10i128.checked_pow(s - scale)?)?),
    };
    let (q, r) = (n / d, n % d);
    let q = match r.unsigned_abs().checked_mul(2)? >= d.unsigned_abs() {
        true => q + n.signum(),
        false => q,
    };
    Some(decimal_format(q, scale))
}
