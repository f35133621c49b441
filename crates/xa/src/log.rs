//! The decision log: the one place a distributed transaction's outcome is
//! decided. Presumed abort: a transaction commits only once its commit
//! record is on stable storage, before any branch is told to commit; with
//! no record, recovery rolls its prepared branches back.
//!
//! The embedded log is a file of lines, appended and synced by one writer
//! thread that syncs every record waiting at once (group commit: many
//! sessions' commits cost one fsync). Another store (a fleet's shared
//! one) implements [`DecisionLog`].

use crate::error::XaError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A logged commit decision whose branches are not all known committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub gtrid: String,
    /// How many branches the transaction prepared.
    pub branches: u32,
    /// When it was decided (Unix milliseconds).
    pub at_ms: u64,
}

pub trait DecisionLog: Send + Sync {
    /// Records that `gtrid` commits. The answer comes once the record is
    /// durable; only then may any branch commit.
    fn commit(&self, gtrid: &str, branches: u32) -> oneshot::Receiver<Result<(), XaError>>;
    /// Records that every branch of `gtrid` committed. Not synced: losing
    /// it only makes recovery look for branches that are gone.
    fn finished(&self, gtrid: &str);
    /// Whether `gtrid`'s commit is logged.
    fn committed(&self, gtrid: &str) -> bool;
    /// The logged commits not yet finished.
    fn pending(&self) -> Vec<Decision>;
    /// Where the log lives, for messages.
    fn describe(&self) -> String;
}

/// Lines longer than this are not records (a torn or foreign file).
const MAX_LINE: usize = 256;
/// The file is rewritten with only the unfinished decisions past this.
const COMPACT_BYTES: u64 = 4 << 20;

enum Req {
    Commit(String, oneshot::Sender<Result<(), XaError>>, Decision),
    Finish(String, String),
}

/// The embedded decision log: `decisions.log` in a directory.
pub struct FileLog {
    path: PathBuf,
    pending: Arc<Mutex<HashMap<String, Decision>>>,
    tx: Mutex<mpsc::Sender<Req>>,
}

impl FileLog {
    /// Opens (or makes) the log in `dir`, reads the decisions it holds and
    /// rewrites it with only the unfinished ones.
    pub fn open(dir: &Path) -> Result<FileLog, XaError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| XaError::Log { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join("decisions.log");
        let pending = match File::open(&path) {
            Ok(f) => read_records(BufReader::new(f), &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(io(&path)(e)),
        };
        let file = rewrite(&path, &pending).map_err(io(&path))?;
        let pending = Arc::new(Mutex::new(pending));
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            path: path.clone(),
            file,
            pending: pending.clone(),
        };
        std::thread::Builder::new()
            .name("xa-log".into())
            .spawn(move || writer.run(rx))
            .map_err(io(&path))?;
        Ok(FileLog {
            path,
            pending,
            tx: Mutex::new(tx),
        })
    }
}

impl DecisionLog for FileLog {
    fn commit(&self, gtrid: &str, branches: u32) -> oneshot::Receiver<Result<(), XaError>> {
        let (reply, rx) = oneshot::channel();
        let d = Decision {
            gtrid: gtrid.to_string(),
            branches,
            at_ms: now_ms(),
        };
        let line = record(&format!("C {gtrid} {branches} {}", d.at_ms));
        if let Err(mpsc::SendError(Req::Commit(_, reply, _))) =
            self.tx.lock().send(Req::Commit(line, reply, d))
        {
            let _ = reply.send(Err(XaError::Closed));
        }
        rx
    }

    fn finished(&self, gtrid: &str) {
        let line = record(&format!("F {gtrid}"));
        let _ = self.tx.lock().send(Req::Finish(line, gtrid.to_string()));
    }

    fn committed(&self, gtrid: &str) -> bool {
        self.pending.lock().contains_key(gtrid)
    }

    fn pending(&self) -> Vec<Decision> {
        let mut v: Vec<Decision> = self.pending.lock().values().cloned().collect();
        v.sort_by(|a, b| a.at_ms.cmp(&b.at_ms).then(a.gtrid.cmp(&b.gtrid)));
        v
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

struct Writer {
    path: PathBuf,
    file: File,
    pending: Arc<Mutex<HashMap<String, Decision>>>,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Req>) {
        let mut buf = Vec::with_capacity(4096);
        let mut waiting = Vec::new();
        let mut size = self.file.metadata().map_or(0, |m| m.len());
        while let Ok(first) = rx.recv() {
            // Everything that arrived meanwhile goes in the same write and
            // the same sync.
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            let mut finished = Vec::new();
            for r in batch {
                match r {
                    Req::Commit(line, reply, d) => {
                        buf.extend_from_slice(line.as_bytes());
                        waiting.push((reply, d));
                    }
                    Req::Finish(line, gtrid) => {
                        buf.extend_from_slice(line.as_bytes());
                        finished.push(gtrid);
                    }
                }
            }
            let res = self
                .file
                .write_all(&buf)
                .and_then(|_| match waiting.is_empty() {
                    true => Ok(()),
                    false => self.file.sync_data(),
                });
            if let Err(e) = res {
                // Whether the records reached the disk is unknown, so no
                // outcome can be told safely: stop as a crash would, and
                // let recovery read what the disk holds.
                tracing::error!(log = %self.path.display(), "the XA decision log cannot be written ({e}): stopping");
                std::process::abort();
            }
            size += buf.len() as u64;
            buf.clear();
            {
                let mut p = self.pending.lock();
                for (_, d) in &waiting {
                    p.insert(d.gtrid.clone(), d.clone());
                }
                for g in &finished {
                    p.remove(g);
                }
            }
            for (reply, _) in waiting.drain(..) {
                let _ = reply.send(Ok(()));
            }
            if size > COMPACT_BYTES {
                let keep = self.pending.lock().clone();
                match rewrite(&self.path, &keep) {
                    Ok(f) => {
                        self.file = f;
                        size = self.file.metadata().map_or(0, |m| m.len());
                    }
                    Err(e) => {
                        tracing::warn!(log = %self.path.display(), "the XA decision log was not compacted: {e}")
                    }
                }
            }
        }
    }
}

/// A record line: its text, a checksum, a newline. A line without its
/// newline or with a wrong sum was never synced whole, so never answered.
fn record(body: &str) -> String {
    format!("{body} {:08x}\n", fnv(body.as_bytes()))
}

fn fnv(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, x| {
        (h ^ u32::from(*x)).wrapping_mul(0x0100_0193)
    })
}

fn read_records(r: impl BufRead, path: &Path) -> HashMap<String, Decision> {
    let mut pending = HashMap::new();
    let mut lines = r.split(b'\n').peekable();
    let mut n = 0;
    while let Some(Ok(line)) = lines.next() {
        n += 1;
        let last = lines.peek().is_none();
        let parsed = std::str::from_utf8(&line)
            .ok()
            .filter(|l| l.len() <= MAX_LINE)
            .and_then(|l| {
                let (body, sum) = l.rsplit_once(' ')?;
                (u32::from_str_radix(sum, 16).ok()? == fnv(body.as_bytes())).then_some(body)
            });
        let Some(body) = parsed else {
            if !last || line.is_empty() {
                // Only the last line can be torn by a crash; any other bad
                // line means the file was damaged.
                tracing::error!(log = %path.display(), line = n, "a damaged XA decision record is ignored");
            }
            continue;
        };
        let mut f = body.split(' ');
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some("C"), Some(g), Some(b), Some(at)) => {
                if let (Ok(branches), Ok(at_ms)) = (b.parse(), at.parse()) {
                    pending.insert(
                        g.to_string(),
                        Decision {
                            gtrid: g.to_string(),
                            branches,
                            at_ms,
                        },
                    );
                }
            }
            (Some("F"), Some(g), None, None) => {
                pending.remove(g);
            }
            _ => {
                tracing::error!(log = %path.display(), line = n, "an unknown XA decision record is ignored")
            }
        }
    }
    pending
}

/// Writes the unfinished decisions to a new file, syncs it and puts it in
/// the log's place; returns it open for appending.
fn rewrite(path: &Path, keep: &HashMap<String, Decision>) -> std::io::Result<File> {
    let tmp = path.with_extension("log.new");
    let mut f = File::create(&tmp)?;
    let mut v: Vec<&Decision> = keep.values().collect();
    v.sort_by_key(|d| d.at_ms);
    let mut text = String::new();
    for d in v {
        text.push_str(&record(&format!(
            "C {} {} {}",
            d.gtrid, d.branches, d.at_ms
        )));
    }
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // The rename itself must survive a crash.
        File::open(dir)?.sync_all()?;
    }
    OpenOptions::new().append(true).open(path)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sextant-xa-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[tokio::test]
    async fn commits_survive_reopen_and_finished_ones_go() {
        let d = dir("reopen");
        {
            let log = FileLog::open(&d).unwrap();
            log.commit("sx:a:1:1", 2).await.unwrap().unwrap();
            log.commit("sx:a:1:2", 3).await.unwrap().unwrap();
            assert!(log.committed("sx:a:1:1"));
            log.finished("sx:a:1:1");
            // A commit after the finish is synced with it: both are on
            // disk when it answers.
            log.commit("sx:a:1:3", 2).await.unwrap().unwrap();
            assert!(!log.committed("sx:a:1:1"));
        }
        let log = FileLog::open(&d).unwrap();
        let p: Vec<String> = log.pending().into_iter().map(|d| d.gtrid).collect();
        assert_eq!(p, vec!["sx:a:1:2", "sx:a:1:3"]);
        assert_eq!(log.pending()[0].branches, 3);
        assert!(!log.committed("sx:a:1:1"));
        assert!(!log.committed("sx:a:1:9"));
        // Reopening compacted the file to the unfinished decisions.
        let text = std::fs::read_to_string(d.join("decisions.log")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn torn_and_damaged_lines_are_not_decisions() {
        let d = dir("torn");
        std::fs::create_dir_all(&d).unwrap();
        let good = record("C sx:a:1:1 2 5");
        let bad_sum = "C sx:a:1:2 2 5 00000000\n";
        let torn = &record("C sx:a:1:3 2 5")[..10];
        std::fs::write(d.join("decisions.log"), format!("{good}{bad_sum}{torn}")).unwrap();
        let log = FileLog::open(&d).unwrap();
        assert!(log.committed("sx:a:1:1"));
        assert!(!log.committed("sx:a:1:2"));
        assert!(!log.committed("sx:a:1:3"));
    }

    #[tokio::test]
    async fn many_concurrent_commits_all_land() {
        let d = dir("many");
        let log = Arc::new(FileLog::open(&d).unwrap());
        let mut waits = Vec::new();
        for i in 0..200 {
            waits.push(log.commit(&format!("sx:a:1:{i:x}"), 2));
        }
        for w in waits {
            w.await.unwrap().unwrap();
        }
        drop(log);
        let log = FileLog::open(&d).unwrap();
        assert_eq!(log.pending().len(), 200);
    }
}
