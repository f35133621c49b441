//! What a client reads for each statement of a script, packet by packet,
//! for differential tests (the same script on a server and through
//! sextant); and the generator that picks their statements.

use super::Raw;

/// What a client reads for one statement.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Ok {
        affected: u64,
        insert_id: u64,
        status: u16,
        warnings: u16,
        info: Vec<u8>,
    },
    Err {
        code: u16,
        state: String,
        message: String,
    },
    /// A result: its column count, rows (as sent), and the status and
    /// warnings of the EOF that ends it (or the error that cut it).
    Rows {
        columns: u64,
        rows: Vec<Vec<u8>>,
        end: Box<Answer>,
    },
}

pub fn lenenc(p: &[u8], at: &mut usize) -> u64 {
    let b = p[*at];
    *at += 1;
    let n = match b {
        0xfc => 2,
        0xfd => 3,
        0xfe => 8,
        _ => return b as u64,
    };
    let mut v = 0u64;
    for i in 0..n {
        v |= (p[*at + i] as u64) << (8 * i);
    }
    *at += n;
    v
}

pub fn answer(packets: &[Vec<u8>]) -> Answer {
    let p = &packets[0];
    match p[0] {
        0xff => Answer::Err {
            code: u16::from_le_bytes([p[1], p[2]]),
            state: String::from_utf8_lossy(&p[4..9]).into_owned(),
            message: String::from_utf8_lossy(&p[9..]).into_owned(),
        },
        0x00 => {
            let mut at = 1;
            let affected = lenenc(p, &mut at);
            let insert_id = lenenc(p, &mut at);
            Answer::Ok {
                affected,
                insert_id,
                status: u16::from_le_bytes([p[at], p[at + 1]]),
                warnings: u16::from_le_bytes([p[at + 2], p[at + 3]]),
                info: p[at + 4..].to_vec(),
            }
        }
        _ => {
            let columns = lenenc(p, &mut 0);
            // Column definitions and their EOF; then rows to the last.
            let first_row = 1 + columns as usize + 1;
            let last = &packets[packets.len() - 1];
            let end = match last[0] {
                0xfe => Answer::Ok {
                    affected: 0,
                    insert_id: 0,
                    warnings: u16::from_le_bytes([last[1], last[2]]),
                    status: u16::from_le_bytes([last[3], last[4]]),
                    info: Vec::new(),
                },
                _ => answer(&packets[packets.len() - 1..]),
            };
            Answer::Rows {
                columns,
                rows: packets[first_row..packets.len() - 1].to_vec(),
                end: Box::new(end),
            }
        }
    }
}

/// xorshift: the same sequences every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Runs `script` in a new session on `port`, logged in with
/// capabilities `caps`, and returns each answer.
pub fn run_script(port: u16, caps: u32, script: &[&str]) -> Vec<Answer> {
    let mut c = Raw::login_with(port, "app", "apppass", Some("sextant_test"), caps, vec![]);
    script
        .iter()
        .map(|sql| {
            c.query(sql);
            answer(&c.read_response())
        })
        .collect()
}
