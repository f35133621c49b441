//! The values of a COM_STMT_EXECUTE's parameters, read from the binary
//! protocol: what a sharded statement's shard key is when a client
//! prepared it.

use crate::codec::Reader;
use crate::ProtoError;

/// Column types of the binary protocol (those a parameter may have).
pub mod ty {
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const NULL: u8 = 6;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
}

/// One parameter's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    /// Strings, decimals, blobs: as sent.
    Bytes(&'a [u8]),
    /// DATE, DATETIME, TIMESTAMP as `YYYY-MM-DD[ HH:MM:SS]`.
    DateTime(String),
    /// TIME, and anything else sextant does not read.
    Other,
}

/// Reads `n` parameter values: `nulls` is the null bitmap, `types` the
/// 2-byte type of each (type, flags: 0x80 unsigned), `values` what follows
/// the types in the packet.
pub fn read_values<'a>(
    n: usize,
    nulls: &[u8],
    types: &[u8],
    values: &'a [u8],
) -> Result<Vec<Value<'a>>, ProtoError> {
    let mut r = Reader::new(values);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if nulls.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0) {
            out.push(Value::Null);
            continue;
        }
        let (t, unsigned) = match types.get(2 * i..2 * i + 2) {
            Some(t) => (t[0], t[1] & 0x80 != 0),
            None => return Err(ProtoError::Truncated("parameter types")),
        };
        let int = |b: &[u8]| -> Value<'a> {
            let mut v = [0u8; 8];
            v[..b.len()].copy_from_slice(b);
            let u = u64::from_le_bytes(v);
            if unsigned {
                Value::UInt(u)
            } else {
                // Sign-extend from the value's width.
                let shift = 64 - 8 * b.len() as u32;
                Value::Int(((u << shift) as i64) >> shift)
            }
        };
        let v = match t {
            ty::NULL => Value::Null,
            ty::TINY => int(r.bytes(1, "parameter")?),
            ty::SHORT | ty::YEAR => int(r.bytes(2, "parameter")?),
            ty::LONG | ty::INT24 => int(r.bytes(4, "parameter")?),
            ty::LONGLONG => int(r.bytes(8, "parameter")?),
            ty::FLOAT => {
                let b = r.bytes(4, "parameter")?;
                Value::Double(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            }
            ty::DOUBLE => {
                let b = r.bytes(8, "parameter")?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Double(f64::from_le_bytes(a))
            }
            ty::DATE | ty::DATETIME | ty::TIMESTAMP => {
                let len = r.u8("parameter")? as usize;
                let b = r.bytes(len, "parameter")?;
                let year = b.get(..2).map_or(0, |y| u16::from_le_bytes([y[0], y[1]]));
                let at = |k: usize| b.get(k).copied().unwrap_or(0);
                let micros = b
                    .get(7..11)
                    .map_or(0, |m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
                match len {
                    0 => Value::DateTime("0000-00-00 00:00:00".into()),
                    4 => Value::DateTime(format!("{year:04}-{:02}-{:02}", at(2), at(3))),
                    11 if micros != 0 => Value::DateTime(format!(
                        "{year:04}-{:02}-{:02} {:02}:{:02}:{:02}.{micros:06}",
                        at(2),
                        at(3),
                        at(4),
                        at(5),
                        at(6)
                    )),
                    _ => Value::DateTime(format!(
                        "{year:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                        at(2),
                        at(3),
                        at(4),
                        at(5),
                        at(6)
                    )),
                }
            }
            ty::TIME => {
                let len = r.u8("parameter")? as usize;
                r.bytes(len, "parameter")?;
                Value::Other
            }
            // Strings, decimals, blobs, JSON, bit, enum, set, geometry.
            _ => Value::Bytes(r.lenenc_bytes("parameter")?),
        };
        out.push(v);
    }
    Ok(out)
}

/// A parameter's value written as an SQL literal of the same value, for a
/// statement sent as text in place of its prepared execution (None: a
/// value sextant does not write: TIME, or a string it cannot quote safely
/// in a multibyte character set whose characters may end in a backslash).
pub fn literal(v: &Value<'_>, backslash_escapes: bool, multibyte: bool) -> Option<Vec<u8>> {
    Some(match v {
        Value::Null => b"NULL".to_vec(),
        Value::Int(i) => i.to_string().into_bytes(),
        Value::UInt(u) => u.to_string().into_bytes(),
        // Scientific notation: the server reads it as a DOUBLE, as the
        // parameter was.
        Value::Double(d) if d.is_finite() => format!("{d:e}").into_bytes(),
        Value::Double(_) => return None,
        Value::DateTime(s) => format!("'{s}'").into_bytes(),
        Value::Bytes(b) => {
            if multibyte && b.iter().any(|c| *c >= 0x80) {
                return None;
            }
            let mut out = Vec::with_capacity(b.len() + 2);
            out.push(b'\'');
            for &c in b.iter() {
                match (c, backslash_escapes) {
                    (b'\'', _) => out.extend_from_slice(b"''"),
                    (b'\\', true) => out.extend_from_slice(b"\\\\"),
                    (0, true) => out.extend_from_slice(b"\\0"),
                    _ => out.push(c),
                }
            }
            out.push(b'\'');
            out
        }
        Value::Other => return None,
    })
}

/// What a column's values are, for writing them in the binary protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnType {
    pub ty: u8,
    pub unsigned: bool,
}

/// A text-protocol row written as a binary-protocol row (as the answer
/// to COM_STMT_EXECUTE), by its columns' types; None when a cell does not
/// read as its type.
pub fn row_from_text(text: &[u8], columns: &[ColumnType]) -> Option<Vec<u8>> {
    let n = columns.len();
    let bitmap = (n + 7 + 2) / 8;
    let mut out = Vec::with_capacity(1 + bitmap + text.len());
    out.push(0);
    out.resize(1 + bitmap, 0);
    let mut r = Reader::new(text);
    for (i, c) in columns.iter().enumerate() {
        let rest = &text[text.len() - r.remaining()..];
        if rest.first() == Some(&0xfb) {
            r.bytes(1, "NULL").ok()?;
            out[1 + (i + 2) / 8] |= 1 << ((i + 2) % 8);
            continue;
        }
        let v = r.lenenc_bytes("cell").ok()?;
        let s = || std::str::from_utf8(v).ok().map(str::trim);
        let int = |width: usize, out: &mut Vec<u8>| -> Option<()> {
            let bytes = match c.unsigned {
                true => s()?.parse::<u64>().ok()?.to_le_bytes(),
                false => s()?.parse::<i64>().ok()?.to_le_bytes(),
            };
            out.extend_from_slice(&bytes[..width]);
            Some(())
        };
        match c.ty {
            ty::TINY => int(1, &mut out)?,
            ty::SHORT | ty::YEAR => int(2, &mut out)?,
            ty::LONG | ty::INT24 => int(4, &mut out)?,
            ty::LONGLONG => int(8, &mut out)?,
            ty::FLOAT => out.extend_from_slice(&s()?.parse::<f32>().ok()?.to_le_bytes()),
            ty::DOUBLE => out.extend_from_slice(&s()?.parse::<f64>().ok()?.to_le_bytes()),
            ty::DATE | ty::DATETIME | ty::TIMESTAMP => {
                let t = s()?;
                let (date, time) = t.split_once(' ').unwrap_or((t, ""));
                let mut d = date.split('-').map(|x| x.parse::<u32>().ok());
                let (y, m, day) = (d.next()??, d.next()??, d.next()??);
                let (clock, frac) = time.split_once('.').unwrap_or((time, ""));
                let mut h = clock.split(':').map(|x| x.parse::<u32>().ok());
                let (hh, mm, ss) = match clock.is_empty() {
                    true => (0, 0, 0),
                    false => (h.next()??, h.next()??, h.next()??),
                };
                let micro = match frac.is_empty() {
                    true => 0,
                    false => format!("{frac:0<6}").get(..6)?.parse::<u32>().ok()?,
                };
                let len = match (y, m, day, hh, mm, ss, micro) {
                    (0, 0, 0, 0, 0, 0, 0) => 0,
                    (_, _, _, 0, 0, 0, 0) => 4,
                    (.., 0) => 7,
                    _ => 11,
                };
                out.push(len);
                if len >= 4 {
                    out.extend_from_slice(&(y as u16).to_le_bytes());
                    out.extend_from_slice(&[m as u8, day as u8]);
                }
                if len >= 7 {
                    out.extend_from_slice(&[hh as u8, mm as u8, ss as u8]);
                }
                if len == 11 {
                    out.extend_from_slice(&micro.to_le_bytes());
                }
            }
            ty::TIME => {
                let t = s()?;
                let (neg, t) = match t.strip_prefix('-') {
                    Some(r) => (1u8, r),
                    None => (0u8, t),
                };
                let (clock, frac) = t.split_once('.').unwrap_or((t, ""));
                let mut h = clock.split(':').map(|x| x.parse::<u32>().ok());
                let (hh, mm, ss) = (h.next()??, h.next()??, h.next()??);
                let micro = match frac.is_empty() {
                    true => 0,
                    false => format!("{frac:0<6}").get(..6)?.parse::<u32>().ok()?,
                };
                let len = match (hh, mm, ss, micro) {
                    (0, 0, 0, 0) => 0,
                    (.., 0) => 8,
                    _ => 12,
                };
                out.push(len);
                if len >= 8 {
                    out.push(neg);
                    out.extend_from_slice(&(hh / 24).to_le_bytes());
                    out.extend_from_slice(&[(hh % 24) as u8, mm as u8, ss as u8]);
                }
                if len == 12 {
                    out.extend_from_slice(&micro.to_le_bytes());
                }
            }
            ty::NULL => return None,
            // DECIMAL, strings, blobs, JSON, BIT, ENUM, SET, geometry: as
            // the text protocol writes them.
            _ => crate::codec::write_lenenc_bytes(&mut out, v),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_each_width() {
        // -2 as TINY, 300 as unsigned SHORT, NULL, 'ab', -5 as LONGLONG,
        // 2024-06-01 10:00:00 as DATETIME.
        let types = [1, 0, 2, 0x80, 3, 0, 253, 0, 8, 0, 12, 0];
        let nulls = [0b0000_0100];
        let mut values = vec![0xfe, 0x2c, 0x01, 2, b'a', b'b'];
        values.extend_from_slice(&(-5i64).to_le_bytes());
        values.extend_from_slice(&[7, 0xe8, 0x07, 6, 1, 10, 0, 0]);
        let v = read_values(6, &nulls, &types, &values).unwrap();
        assert_eq!(
            v,
            [
                Value::Int(-2),
                Value::UInt(300),
                Value::Null,
                Value::Bytes(b"ab"),
                Value::Int(-5),
                Value::DateTime("2024-06-01 10:00:00".into()),
            ]
        );
        assert!(read_values(1, &[0], &[3, 0], &[1, 2]).is_err());
        assert!(read_values(1, &[0], &[], &[1, 2, 3, 4]).is_err());
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn literals_say_the_same_value() {
        let lit = |v: Value<'_>| String::from_utf8(literal(&v, true, false).unwrap()).unwrap();
        assert_eq!(lit(Value::Int(-5)), "-5");
        assert_eq!(lit(Value::UInt(u64::MAX)), "18446744073709551615");
        assert_eq!(lit(Value::Double(0.1)), "1e-1");
        assert_eq!(lit(Value::Null), "NULL");
        assert_eq!(lit(Value::Bytes(b"it's a \\ \0")), "'it''s a \\\\ \\0'");
        assert_eq!(
            literal(&Value::Bytes(b"a\\b"), false, false).unwrap(),
            b"'a\\b'"
        );
        assert!(literal(&Value::Bytes("é".as_bytes()), true, true).is_none());
        assert!(literal(&Value::Other, true, false).is_none());
    }

    #[test]
    fn text_rows_become_binary_rows() {
        let cols = [
            ColumnType {
                ty: ty::LONGLONG,
                unsigned: false,
            },
            ColumnType {
                ty: ty::TINY,
                unsigned: true,
            },
            ColumnType {
                ty: ty::DOUBLE,
                unsigned: false,
            },
            ColumnType {
                ty: 246,
                unsigned: false,
            },
            ColumnType {
                ty: ty::DATETIME,
                unsigned: false,
            },
            ColumnType {
                ty: ty::DATE,
                unsigned: false,
            },
            ColumnType {
                ty: ty::TIME,
                unsigned: false,
            },
            ColumnType {
                ty: 253,
                unsigned: false,
            },
        ];
        let mut text = Vec::new();
        for cell in [
            "-2",
            "255",
            "1.5",
            "12.50",
            "2024-02-29 13:14:15.000250",
            "2024-01-02",
            "-27:00:01",
        ] {
            crate::codec::write_lenenc_bytes(&mut text, cell.as_bytes());
        }
        text.push(0xfb);
        let b = row_from_text(&text, &cols).unwrap();
        // Header, then the NULL bitmap: column 7 is bit 7 + 2 = 9.
        let mut want = vec![0, 0, 0b10];
        want.extend_from_slice(&(-2i64).to_le_bytes());
        want.push(255);
        want.extend_from_slice(&1.5f64.to_le_bytes());
        want.extend_from_slice(b"\x0512.50");
        want.extend_from_slice(&[11, 0xe8, 0x07, 2, 29, 13, 14, 15, 250, 0, 0, 0]);
        want.extend_from_slice(&[4, 0xe8, 0x07, 1, 2]);
        want.extend_from_slice(&[8, 1, 1, 0, 0, 0, 3, 0, 1]);
        assert_eq!(b, want);
        // A cell that is not its column's type.
        let mut bad = Vec::new();
        crate::codec::write_lenenc_bytes(&mut bad, b"x");
        assert!(row_from_text(&bad, &cols[..1]).is_none());
    }
}
