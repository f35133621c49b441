//! Packet framing and the protocol's primitive types (fixed and
//! length-encoded integers and strings).

use crate::ProtoError;

/// A frame carrying this many payload bytes is continued by the next frame.
pub const MAX_PAYLOAD: usize = 0xFF_FFFF;
pub const HEADER_LEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: usize,
    pub seq: u8,
}

/// Decodes a frame header from the first four bytes of `b`, if present.
#[inline]
pub fn parse_header(b: &[u8]) -> Option<FrameHeader> {
    if b.len() < HEADER_LEN {
        return None;
    }
    Some(FrameHeader {
        len: b[0] as usize | (b[1] as usize) << 8 | (b[2] as usize) << 16,
        seq: b[3],
    })
}

#[inline]
pub fn write_header(out: &mut [u8], len: usize, seq: u8) {
    out[0] = len as u8;
    out[1] = (len >> 8) as u8;
    out[2] = (len >> 16) as u8;
    out[3] = seq;
}

/// Appends `payload` as one logical packet, split into frames where it is
/// 16 MiB or longer. Returns the sequence id for the packet after it.
pub fn write_packet(out: &mut Vec<u8>, mut seq: u8, payload: &[u8]) -> u8 {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_PAYLOAD);
        let at = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        write_header(&mut out[at..], n, seq);
        out.extend_from_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_PAYLOAD {
            return seq;
        }
    }
}

/// Starts a packet built in place: reserve the header, append the payload,
/// then call [`finish_packet`]. Only for payloads known to be under 16 MiB.
#[inline]
pub fn begin_packet(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    at
}

#[inline]
pub fn finish_packet(out: &mut [u8], start: usize, seq: u8) {
    let len = out.len() - start - HEADER_LEN;
    debug_assert!(len < MAX_PAYLOAD);
    write_header(&mut out[start..], len, seq);
}

pub fn write_lenenc_int(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else if v < 1 << 16 {
        out.push(0xfc);
        out.extend_from_slice(&(v as u16).to_le_bytes());
    } else if v < 1 << 24 {
        out.push(0xfd);
        out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
    } else {
        out.push(0xfe);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub fn write_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_lenenc_int(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over a packet payload. Every read checks bounds and reports a
/// truncated packet as an error, never a panic: payloads come off the wire.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtoError> {
        if self.buf.len() < n {
            return Err(ProtoError::Truncated(what));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ProtoError> {
        Ok(self.bytes(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, ProtoError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u24(&mut self, what: &'static str) -> Result<u32, ProtoError> {
        let b = self.bytes(3, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], 0]))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ProtoError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ProtoError> {
        let b = self.bytes(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn lenenc_int(&mut self, what: &'static str) -> Result<u64, ProtoError> {
        match self.u8(what)? {
            v @ 0..=0xfa => Ok(v as u64),
            0xfc => Ok(self.u16(what)? as u64),
            0xfd => Ok(self.u24(what)? as u64),
            0xfe => self.u64(what),
            _ => Err(ProtoError::Malformed(what)),
        }
    }
    pub fn lenenc_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtoError> {
        let n = self.lenenc_int(what)?;
        let n = usize::try_from(n).map_err(|_| ProtoError::Malformed(what))?;
        self.bytes(n, what)
    }
    /// A NUL-terminated string; the NUL is consumed, not returned.
    pub fn nul_bytes(&mut self, what: &'static str) -> Result<&'a [u8], ProtoError> {
        let pos = self
            .buf
            .iter()
            .position(|&c| c == 0)
            .ok_or(ProtoError::Truncated(what))?;
        let s = &self.buf[..pos];
        self.buf = &self.buf[pos + 1..];
        Ok(s)
    }
    /// Like [`Reader::nul_bytes`], but a missing NUL ends the string at the
    /// end of the packet (some clients omit the last terminator).
    pub fn nul_or_eof_bytes(&mut self) -> &'a [u8] {
        match self.buf.iter().position(|&c| c == 0) {
            Some(pos) => {
                let s = &self.buf[..pos];
                self.buf = &self.buf[pos + 1..];
                s
            }
            None => self.rest(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trip() {
        for v in [
            0u64,
            1,
            250,
            251,
            65535,
            65536,
            (1 << 24) - 1,
            1 << 24,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_lenenc_int(&mut out, v);
            let mut r = Reader::new(&out);
            assert_eq!(r.lenenc_int("v").unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn lenenc_rejects_ff_and_truncation() {
        assert!(Reader::new(&[0xff]).lenenc_int("x").is_err());
        assert!(Reader::new(&[0xfc, 1]).lenenc_int("x").is_err());
        assert!(Reader::new(&[0x05, b'a']).lenenc_bytes("x").is_err());
    }

    #[test]
    fn large_packets_are_split() {
        let payload = vec![7u8; MAX_PAYLOAD * 2 + 3];
        let mut out = Vec::new();
        let next = write_packet(&mut out, 5, &payload);
        assert_eq!(next, 8);
        let h1 = parse_header(&out).unwrap();
        assert_eq!((h1.len, h1.seq), (MAX_PAYLOAD, 5));
        let h2 = parse_header(&out[4 + MAX_PAYLOAD..]).unwrap();
        assert_eq!((h2.len, h2.seq), (MAX_PAYLOAD, 6));
        let h3 = parse_header(&out[8 + 2 * MAX_PAYLOAD..]).unwrap();
        assert_eq!((h3.len, h3.seq), (3, 7));

        // Exactly MAX_PAYLOAD needs an empty trailing frame.
        let mut out = Vec::new();
        assert_eq!(write_packet(&mut out, 0, &vec![1u8; MAX_PAYLOAD]), 2);
        assert_eq!(out.len(), 8 + MAX_PAYLOAD);
        assert_eq!(parse_header(&out[4 + MAX_PAYLOAD..]).unwrap().len, 0);
    }
}
