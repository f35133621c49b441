//! The compressed protocol: a layer under the packets. Each compressed
//! frame has a 7-byte header (compressed length, its own sequence id,
//! length before compression, 0 when the frame is not compressed) and
//! carries any run of packet bytes: part of a packet or several.

use crate::codec::MAX_PAYLOAD;
use crate::ProtoError;
use std::io::Write;

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

/// Inflated at most this far ahead of what the reader asked for, so a
/// small frame after a large one does not wait for another read. A frame
/// up to this size is held whole until its end is checked.
const AHEAD: usize = 64 << 10;

/// One direction-pair of a compressed connection.
pub struct Compression {
    pub algorithm: Algorithm,
    /// Sequence id of the next frame sent: it follows the last frame read,
    /// and a client's new command starts again from 0.
    next_seq: u8,
    /// The frame being read, when its header has been and its body has not
    /// all been.
    frame: Option<Frame>,
    /// The zlib stream of the frame being read (kept between frames).
    inflate: Option<Box<flate2::Decompress>>,
    /// What the zlib frame being read inflated to and the reader has not
    /// got yet: a frame's last bytes (a small frame's all) reach the
    /// reader only once its stream ended at the announced length with its
    /// checksum right, so a frame found bad at its end has not handed over
    /// a statement to run.
    stage: Vec<u8>,
}

impl std::fmt::Debug for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compression")
            .field("algorithm", &self.algorithm)
            .field("next_seq", &self.next_seq)
            .field("frame", &self.frame)
            .finish()
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Bytes of its body not read yet.
    body_left: usize,
    /// Bytes it has yet to inflate to (compressed frames).
    out_left: usize,
    compressed: bool,
}

impl Compression {
    pub fn new(algorithm: Algorithm) -> Self {
        Compression {
            algorithm,
            next_seq: 0,
            frame: None,
            inflate: None,
            stage: Vec::new(),
        }
    }

    /// Whether a frame has begun and not ended: the peer is in the middle
    /// of sending something.
    pub fn in_frame(&self) -> bool {
        self.frame.is_some()
    }

    /// Moves packet bytes from the frames at the front of `input` to `out`
    /// until `out` holds `want` bytes (a little more from an uncompressed
    /// frame or a zstd one) or `input` has nothing more to give. A zlib
    /// frame is inflated as its bytes arrive, never past the length its
    /// header announced (which may not exceed `max_frame`), and must end
    /// exactly there; its last byte (a frame of up to `AHEAD` bytes: all of
    /// it) reaches `out` only then. What it consumes leaves `input`.
    pub fn decode(
        &mut self,
        input: &mut Vec<u8>,
        out: &mut Vec<u8>,
        want: usize,
        max_frame: usize,
    ) -> Result<(), ProtoError> {
        let mut pos = 0;
        let r = self.decode_from(input, &mut pos, out, want, max_frame);
        input.drain(..pos);
        r
    }

    fn decode_from(
        &mut self,
        input: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        want: usize,
        max_frame: usize,
    ) -> Result<(), ProtoError> {
        while out.len() < want {
            let mut f = match self.frame {
                Some(f) => f,
                None => {
                    let Some(h) = input.get(*pos..*pos + COMPRESSED_HEADER_LEN) else {
                        return Ok(());
                    };
                    let clen = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
                    let seq = h[3];
                    let ulen = h[4] as usize | (h[5] as usize) << 8 | (h[6] as usize) << 16;
                    // A client starts each command at 0; within one, its
                    // frames follow the last one either side sent.
                    if seq != 0 && seq != self.next_seq {
                        return Err(ProtoError::FrameOutOfOrder {
                            expected: self.next_seq,
                            got: seq,
                        });
                    }
                    let size = if ulen == 0 { clen } else { ulen };
                    if size > max_frame {
                        return Err(ProtoError::FrameTooLarge {
                            size,
                            max: max_frame,
                        });
                    }
                    if ulen != 0 && clen == 0 {
                        return Err(ProtoError::Uncompress("compressed frame without data"));
                    }
                    *pos += COMPRESSED_HEADER_LEN;
                    self.next_seq = seq.wrapping_add(1);
                    if ulen != 0 && self.algorithm == Algorithm::Zlib {
                        self.stage.clear();
                        match &mut self.inflate {
                            Some(z) => z.reset(true),
                            None => self.inflate = Some(Box::new(flate2::Decompress::new(true))),
                        }
                    }
                    Frame {
                        body_left: clen,
                        out_left: ulen,
                        compressed: ulen != 0,
                    }
                }
            };
            let avail = &input[*pos..(*pos + f.body_left).min(input.len())];
            if !f.compressed {
                out.extend_from_slice(avail);
                *pos += avail.len();
                f.body_left -= avail.len();
                self.frame = (f.body_left > 0).then_some(f);
                if f.body_left > 0 {
                    return Ok(());
                }
                continue;
            }
            let done = match (self.algorithm, &mut self.inflate) {
                (Algorithm::Zlib, Some(z)) => {
                    let stage = &mut self.stage;
                    let at = stage.len();
                    let asked = want.saturating_sub(out.len() + at);
                    let room = (f.out_left + 1).min(asked.max(AHEAD));
                    stage.resize(at + room, 0);
                    let (in0, out0) = (z.total_in(), z.total_out());
                    let status =
                        z.decompress(avail, &mut stage[at..], flate2::FlushDecompress::None);
                    let used = (z.total_in() - in0) as usize;
                    let made = (z.total_out() - out0) as usize;
                    stage.truncate(at + made);
                    let status = status.map_err(|_| {
                        ProtoError::Uncompress("compressed frame that is not zlib data")
                    })?;
                    *pos += used;
                    f.body_left -= used;
                    if made > f.out_left {
                        return Err(ProtoError::Uncompress(
                            "compressed frame that inflates to more than its header says",
                        ));
                    }
                    f.out_left -= made;
                    match status {
                        flate2::Status::StreamEnd if f.out_left > 0 => {
                            return Err(ProtoError::Uncompress(
                                "compressed frame that inflates to less than its header says",
                            ))
                        }
                        flate2::Status::StreamEnd if f.body_left > 0 => {
                            return Err(ProtoError::Uncompress(
                                "compressed frame with data after its zlib stream",
                            ))
                        }
                        flate2::Status::StreamEnd => {
                            out.extend_from_slice(stage);
                            stage.clear();
                            true
                        }
                        _ if used == 0 && made == 0 => {
                            if f.body_left > avail.len() {
                                // Waiting for more of its body.
                                self.frame = Some(f);
                                return Ok(());
                            }
                            return Err(ProtoError::Uncompress("truncated zlib data"));
                        }
                        _ => {
                            if stage.len() > AHEAD {
                                // A large frame streams, all but its last
                                // byte: the packet it ends with is still
                                // incomplete until its end is checked.
                                let n = stage.len() - 1;
                                out.extend_from_slice(&stage[..n]);
                                stage.drain(..n);
                            }
                            false
                        }
                    }
                }
                _ => {
                    // zstd frames are inflated whole, once all arrived: at
                    // most the announced length, which is within max_frame.
                    if avail.len() < f.body_left {
                        self.frame = Some(f);
                        return Ok(());
                    }
                    let v = zstd::bulk::decompress(avail, f.out_left).map_err(|_| {
                        ProtoError::Uncompress("compressed frame that is not zstd data")
                    })?;
                    if v.len() != f.out_left {
                        return Err(ProtoError::Uncompress(
                            "compressed frame that inflates to less than its header says",
                        ));
                    }
                    out.extend_from_slice(&v);
                    *pos += avail.len();
                    true
                }
            };
            self.frame = (!done).then_some(f);
        }
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
                rx.decode(&mut input, &mut out, usize::MAX, MAX_PAYLOAD)
                    .unwrap();
            }
            assert!(input.is_empty());
            assert_eq!(&out[..data.len()], &data[..]);
            assert_eq!(&out[data.len()..], b"tiny");
            assert_eq!(rx.next_seq, 2);
        }
    }

    fn frame(seq: u8, body: &[u8], ulen: usize) -> Vec<u8> {
        let mut f = (body.len() as u32).to_le_bytes()[..3].to_vec();
        f.push(seq);
        f.extend_from_slice(&(ulen as u32).to_le_bytes()[..3]);
        f.extend_from_slice(body);
        f
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode_all(wire: &[u8]) -> Result<Vec<u8>, ProtoError> {
        let mut rx = Compression::new(Algorithm::Zlib);
        let (mut input, mut out) = (wire.to_vec(), Vec::new());
        rx.decode(&mut input, &mut out, usize::MAX, 1 << 20)?;
        Ok(out)
    }

    #[test]
    fn frames_that_do_not_inflate_to_their_header_are_refused() {
        let data = [b'x'; 1000];
        let z = zlib(&data);
        assert_eq!(decode_all(&frame(0, &z, 1000)).unwrap(), data);
        let cases: [(&str, Vec<u8>); 6] = [
            ("announces more", frame(0, &z, 1100)),
            ("announces less", frame(0, &z, 900)),
            ("not zlib", frame(0, &[7u8; 40], 1000)),
            ("truncated", frame(0, &z[..z.len() - 6], 1000)),
            (
                "data after the stream",
                frame(0, &[&z[..], b"junk"].concat(), 1000),
            ),
            ("empty body", frame(0, &[], 1000)),
        ];
        for (what, wire) in cases {
            match decode_all(&wire) {
                Err(ProtoError::Uncompress(_)) => {}
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    /// A bit flipped anywhere in a frame's zlib data, its checksum
    /// included, is found: the frame is refused, or (a flip in a part of
    /// the encoding that does not matter) it still inflates to exactly
    /// what was sent. Never to something else.
    #[test]
    fn a_frame_with_a_bit_flipped_is_refused_or_unchanged() {
        let data: Vec<u8> = b"\x03SELECT c FROM sbtest1 WHERE id = 42 AND k = 'some text'".to_vec();
        let z = zlib(&data);
        let mut refused = 0;
        for i in 2..z.len() {
            for bit in 0..8 {
                let mut bad = z.clone();
                bad[i] ^= 1 << bit;
                match decode_all(&frame(0, &bad, data.len())) {
                    Err(ProtoError::Uncompress(_)) => refused += 1,
                    Ok(out) => assert_eq!(out, data, "byte {i} bit {bit}: other data"),
                    Err(e) => panic!("byte {i} bit {bit}: {e}"),
                }
            }
        }
        assert!(refused * 10 > (z.len() - 2) * 8 * 9, "{refused} refused");
    }

    /// A frame whose stream goes on past its packet (a flipped bit in a
    /// block header) or whose checksum is wrong gives nothing to the
    /// reader, even one that asked for just a packet header: the error
    /// comes before any statement could run.
    #[test]
    fn a_bad_frame_hands_over_nothing_before_its_end_is_checked() {
        let mut payload = b"\x03LOAD DATA LOCAL INFILE '/nonexistent' INTO TABLE t".to_vec();
        payload.resize(payload.len() + 64, b' ');
        let z = zlib(&payload);
        for i in 2..z.len() {
            for bit in 0..8 {
                let mut bad = z.clone();
                bad[i] ^= 1 << bit;
                let mut rx = Compression::new(Algorithm::Zlib);
                let (mut input, mut out) = (frame(0, &bad, payload.len()), Vec::new());
                let r = rx.decode(&mut input, &mut out, 4, 1 << 20);
                let mut again = Vec::new();
                let whole = rx.decode(&mut input, &mut again, usize::MAX, 1 << 20);
                if r.is_err() || whole.is_err() || out.len() + again.len() < payload.len() {
                    assert!(
                        out.is_empty(),
                        "byte {i} bit {bit}: {} bytes handed over from a bad frame",
                        out.len()
                    );
                } else {
                    assert_eq!([out, again].concat(), payload, "byte {i} bit {bit}");
                }
            }
        }
    }

    #[test]
    fn a_frame_out_of_order_or_too_large_is_refused() {
        assert!(matches!(
            decode_all(&frame(5, b"\x01\x00\x00\x00\x0e", 0)),
            Err(ProtoError::FrameOutOfOrder {
                expected: 0,
                got: 5
            })
        ));
        // After frame 0 comes 1 (or a new command's 0), not 3.
        let wire = [frame(0, b"ab", 0), frame(1, b"cd", 0), frame(3, b"ef", 0)].concat();
        assert!(matches!(
            decode_all(&wire),
            Err(ProtoError::FrameOutOfOrder {
                expected: 2,
                got: 3
            })
        ));
        let wire = [frame(0, b"ab", 0), frame(0, b"cd", 0)].concat();
        assert_eq!(decode_all(&wire).unwrap(), b"abcd");
        // Refused on its header, before any of its body arrives.
        assert!(matches!(
            decode_all(&frame(0, b"", (1 << 20) + 1)[..7]),
            Err(ProtoError::FrameTooLarge { .. })
        ));
    }

    /// A frame of 16 MiB of zeros is 16 KiB of zlib: it is inflated only as
    /// far as the reader asks.
    #[test]
    fn a_large_frame_inflates_only_as_far_as_asked() {
        let data = vec![0u8; MAX_PAYLOAD];
        let mut wire = frame(0, &zlib(&data), MAX_PAYLOAD);
        let mut rx = Compression::new(Algorithm::Zlib);
        let mut out = Vec::new();
        rx.decode(&mut wire, &mut out, 4, MAX_PAYLOAD).unwrap();
        assert!(
            out.len() >= 4 && out.len() <= 2 * AHEAD + 1,
            "{}",
            out.len()
        );
        assert!(rx.in_frame());
        let mut total = out.len();
        while rx.in_frame() {
            out.clear();
            rx.decode(&mut wire, &mut out, 1 << 20, MAX_PAYLOAD)
                .unwrap();
            assert!(out.len() <= (1 << 20) + 2 * AHEAD + 1);
            total += out.len();
        }
        assert_eq!(total, MAX_PAYLOAD);
        assert!(wire.is_empty());
    }
}
