//! The compressed protocol: a layer under the packets. Each compressed
//! frame has a 7-byte header (compressed length, its own sequence id,
//! length before compression, 0 when the frame is not compressed) and
//! carries any run of packet bytes: part of a packet or several.

use crate::codec::MAX_PAYLOAD;
use crate::ProtoError;
use std::io::{Read, Write};

pub const COMPRESSED_HEADER_LEN: usize = 7;

/// Below this, a payload goes uncompressed (as the servers do: it would
/// not shrink).
const MIN_COMPRESS_LEN: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Zlib,
    /// MySQL 8's CLIENT_ZSTD_COMPRESSION_ALGORITHM, with the level the
    /// client asked for.
    Zstd(i32),
}

/// One direction-pair of a compressed connection.
#[derive(Debug)]
pub struct Compression {
    pub algorithm: Algorithm,
    /// Sequence id of the next frame sent: it follows the last frame read,
    /// and a client's new command starts again from 0.
    next_seq: u8,
}

impl Compression {
    pub fn new(algorithm: Algorithm) -> Self {
        Compression {
            algorithm,
            next_seq: 0,
        }
    }

    /// Moves the packet bytes of every whole frame at the front of `input`
    /// to `out`.
    pub fn decode(&mut self, input: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<(), ProtoError> {
        let mut pos = 0;
        while input.len() - pos >= COMPRESSED_HEADER_LEN {
            let h = &input[pos..pos + COMPRESSED_HEADER_LEN];
            let clen = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
            let seq = h[3];
            let ulen = h[4] as usize | (h[5] as usize) << 8 | (h[6] as usize) << 16;
            if input.len() - pos < COMPRESSED_HEADER_LEN + clen {
                break;
            }
            let body = &input[pos + COMPRESSED_HEADER_LEN..pos + COMPRESSED_HEADER_LEN + clen];
            if ulen == 0 {
                out.extend_from_slice(body);
            } else {
                let at = out.len();
                out.reserve(ulen);
                match self.algorithm {
                    Algorithm::Zlib => {
                        // At most what the header announced: a frame cannot
                        // inflate beyond it.
                        flate2::read::ZlibDecoder::new(body)
                            .take(ulen as u64)
                            .read_to_end(out)
                            .map_err(|_| ProtoError::Malformed("zlib-compressed frame"))?;
                    }
                    Algorithm::Zstd(_) => {
                        let v = zstd::bulk::decompress(body, ulen)
                            .map_err(|_| ProtoError::Malformed("zstd-compressed frame"))?;
                        out.extend_from_slice(&v);
                    }
                }
                if out.len() - at != ulen {
                    return Err(ProtoError::Malformed("compressed frame length"));
                }
            }
            self.next_seq = seq.wrapping_add(1);
            pos += COMPRESSED_HEADER_LEN + clen;
        }
        input.drain(..pos);
        Ok(())
    }

    /// Appends `data` to `out` as compressed frames.
    pub fn encode(&mut self, data: &[u8], out: &mut Vec<u8>) {
        for chunk in data.chunks(MAX_PAYLOAD) {
            let at = out.len();
            out.extend_from_slice(&[0; COMPRESSED_HEADER_LEN]);
            let mut ulen = 0;
            if chunk.len() >= MIN_COMPRESS_LEN {
                let packed = match self.algorithm {
                    Algorithm::Zlib => {
                        let mut e = flate2::write::ZlibEncoder::new(
                            std::mem::take(out),
                            flate2::Compression::default(),
                        );
                        let ok = e.write_all(chunk).is_ok();
                        match e.finish() {
                            Ok(v) if ok => {
                                *out = v;
                                true
                            }
                            _ => false,
                        }
                    }
                    Algorithm::Zstd(level) => match zstd::bulk::compress(chunk, level) {
                        Ok(v) => {
                            out.extend_from_slice(&v);
                            true
                        }
                        Err(_) => false,
                    },
                };
                let clen = out.len().saturating_sub(at + COMPRESSED_HEADER_LEN);
                if packed && clen < chunk.len() {
                    ulen = chunk.len();
                } else {
                    out.truncate(at + COMPRESSED_HEADER_LEN);
                }
            }
            if ulen == 0 {
                out.extend_from_slice(chunk);
            }
            let clen = out.len() - at - COMPRESSED_HEADER_LEN;
            let h = &mut out[at..at + COMPRESSED_HEADER_LEN];
            h[..3].copy_from_slice(&(clen as u32).to_le_bytes()[..3]);
            h[3] = self.next_seq;
            h[4..].copy_from_slice(&(ulen as u32).to_le_bytes()[..3]);
            self.next_seq = self.next_seq.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A COM_PING-sized payload goes as it is: length 5, sequence 0, and 0
    /// as the length before compression.
    #[test]
    fn small_payload_goes_uncompressed() {
        let mut c = Compression::new(Algorithm::Zlib);
        let mut out = Vec::new();
        c.encode(b"\x01\x00\x00\x00\x0e", &mut out);
        assert_eq!(out, b"\x05\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x0e");
    }

    #[test]
    fn round_trips() {
        for alg in [Algorithm::Zlib, Algorithm::Zstd(3)] {
            let data: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8).collect();
            let mut tx = Compression::new(alg);
            let mut wire = Vec::new();
            tx.encode(&data, &mut wire);
            tx.encode(b"tiny", &mut wire);
            assert!(wire.len() < data.len() / 10, "{alg:?} compressed");
            assert_eq!(wire[3], 0);
            let mut rx = Compression::new(alg);
            let mut out = Vec::new();
            // Byte by byte: frames complete only when whole.
            let mut input = Vec::new();
            for b in &wire {
                input.push(*b);
                rx.decode(&mut input, &mut out).unwrap();
            }
            assert!(input.is_empty());
            assert_eq!(&out[..data.len()], &data[..]);
            assert_eq!(&out[data.len()..], b"tiny");
            assert_eq!(rx.next_seq, 2);
        }
    }

    #[test]
    fn lying_lengths_are_refused() {
        let mut tx = Compression::new(Algorithm::Zlib);
        let mut wire = Vec::new();
        tx.encode(&[b'x'; 1000], &mut wire);
        // Announce more than the frame inflates to.
        wire[4] = 0xff;
        wire[5] = 0xff;
        let mut rx = Compression::new(Algorithm::Zlib);
        assert!(rx.decode(&mut wire, &mut Vec::new()).is_err());
    }
}
