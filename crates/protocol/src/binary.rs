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
                match len {
                    0 => Value::DateTime("0000-00-00 00:00:00".into()),
                    4 => Value::DateTime(format!("{year:04}-{:02}-{:02}", at(2), at(3))),
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
