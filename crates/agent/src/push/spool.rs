//! Periods the server did not take, waiting for it: a few in memory, or (`push-spool=DIR`)
//! up to `push-spool-max=` bytes on disk, where they outlive the JVM and are sent by the next
//! recording with the same spool. Past the bound the oldest periods are dropped.
//!
//! On disk each period is a file `<sequence>.period`: a line `jtap-period <name> <from>
//! <until>`, then the payload (JFR or OTLP, as the endpoint takes). It is written to a temporary name and renamed, so a
//! crash leaves whole periods only.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One period on its way: its ingest name (`app{labels}`, URL-encoded), span and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// `app{k=v}`, URL-encoded.
    pub name: String,
    /// Start, Unix seconds.
    pub from: u64,
    /// End, Unix seconds.
    pub until: u64,
    /// The request's body: a JFR recording, or an OTLP message.
    pub payload: Vec<u8>,
}

/// Where waiting periods are kept.
pub enum Backlog {
    /// At most `max` periods in memory.
    Memory { periods: VecDeque<Item>, max: usize },
    /// A directory of at most `max` bytes.
    Disk(Spool),
}

/// A spool directory and the periods in it, oldest first.
pub struct Spool {
    dir: PathBuf,
    max: u64,
    files: VecDeque<(PathBuf, u64)>,
    bytes: u64,
    next: u64,
}

const SUFFIX: &str = ".period";
const MAGIC: &str = "jtap-period";

impl Backlog {
    /// Adds a period; returns how many (older ones, or this one) were dropped for the bound.
    pub fn add(&mut self, item: Item) -> u64 {
        match self {
            Backlog::Memory { periods, max } => {
                periods.push_back(item);
                let dropped = periods.len().saturating_sub(*max);
                periods.drain(..dropped);
                dropped as u64
            }
            Backlog::Disk(spool) => spool.add(&item),
        }
    }

    /// The oldest waiting period, if any, taken out until [`Backlog::settle`] says whether
    /// it was sent. A spooled file that does not read is deleted and counted in `dropped`.
    pub fn oldest(&mut self, dropped: &mut u64) -> Option<Item> {
        match self {
            Backlog::Memory { periods, .. } => periods.pop_front(),
            Backlog::Disk(spool) => spool.oldest(dropped),
        }
    }

    /// After [`Backlog::oldest`]: `done` (sent, or refused for good) forgets it, otherwise it
    /// stays the oldest.
    pub fn settle(&mut self, item: Item, done: bool) {
        match self {
            Backlog::Memory { periods, .. } => {
                if !done {
                    periods.push_front(item);
                }
            }
            Backlog::Disk(spool) => {
                if done {
                    spool.remove_oldest();
                }
            }
        }
    }

    /// Periods waiting and their bytes.
    pub fn size(&self) -> (usize, u64) {
        match self {
            Backlog::Memory { periods, .. } => (
                periods.len(),
                periods.iter().map(|p| p.payload.len() as u64).sum(),
            ),
            Backlog::Disk(spool) => (spool.files.len(), spool.bytes),
        }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.size().0 == 0
    }
}

impl Spool {
    /// Opens (creating it if need be) a spool directory of at most `max` bytes; what earlier
    /// recordings left there waits first. Unfinished temporary files are deleted.
    pub fn open(dir: &str, max: u64) -> Result<Spool, String> {
        let error = |e: std::io::Error| format!("push-spool={dir}: {e}");
        std::fs::create_dir_all(dir).map_err(error)?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(error)? {
            let path = entry.map_err(error)?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.ends_with(".tmp") && name.starts_with('.') {
                let _ = std::fs::remove_file(&path);
            } else if let Some(sequence) = name
                .strip_suffix(SUFFIX)
                .and_then(|n| n.parse::<u64>().ok())
            {
                let size = std::fs::metadata(&path).map_err(error)?.len();
                found.push((sequence, path, size));
            }
        }
        found.sort();
        // A file that is not writable there fails now, not at the first refused period.
        let probe = Path::new(dir).join(".probe.tmp");
        std::fs::write(&probe, b"").map_err(error)?;
        let _ = std::fs::remove_file(&probe);
        let mut spool = Spool {
            dir: PathBuf::from(dir),
            max,
            next: found.last().map_or(1, |(sequence, _, _)| sequence + 1),
            bytes: found.iter().map(|(_, _, size)| size).sum(),
            files: found
                .into_iter()
                .map(|(_, path, size)| (path, size))
                .collect(),
        };
        spool.trim(0);
        Ok(spool)
    }

    /// Writes a period; drops the oldest while the spool would exceed its bound.
    fn add(&mut self, item: &Item) -> u64 {
        let header = format!("{MAGIC} {} {} {}\n", item.name, item.from, item.until);
        let size = (header.len() + item.payload.len()) as u64;
        if size > self.max {
            log!("push-spool: a period of {size} bytes exceeds push-spool-max: dropped");
            return 1;
        }
        let dropped = self.trim(size);
        let path = self.dir.join(format!("{:012}{SUFFIX}", self.next));
        let temporary = self.dir.join(format!(".{:012}.tmp", self.next));
        let written = std::fs::File::create(&temporary)
            .and_then(|mut file| {
                file.write_all(header.as_bytes())?;
                file.write_all(&item.payload)
            })
            .and_then(|()| std::fs::rename(&temporary, &path));
        match written {
            Ok(()) => {
                self.next += 1;
                self.bytes += size;
                self.files.push_back((path, size));
                dropped
            }
            Err(e) => {
                let _ = std::fs::remove_file(&temporary);
                log!(
                    "push-spool: cannot write {}: {e}: period dropped",
                    path.display()
                );
                dropped + 1
            }
        }
    }

    /// Deletes the oldest periods until `incoming` more bytes fit; returns how many.
    fn trim(&mut self, incoming: u64) -> u64 {
        let mut dropped = 0;
        while self.bytes + incoming > self.max && !self.files.is_empty() {
            self.remove_oldest();
            dropped += 1;
        }
        dropped
    }

    fn remove_oldest(&mut self) {
        if let Some((path, size)) = self.files.pop_front() {
            self.bytes -= size;
            if let Err(e) = std::fs::remove_file(&path) {
                log!("push-spool: cannot delete {}: {e}", path.display());
            }
        }
    }

    fn oldest(&mut self, dropped: &mut u64) -> Option<Item> {
        loop {
            let (path, _) = self.files.front()?;
            match std::fs::read(path)
                .map_err(|e| e.to_string())
                .and_then(|b| parse(&b))
            {
                Ok(item) => return Some(item),
                Err(e) => {
                    log!("push-spool: {}: {e}: dropped", path.display());
                    self.remove_oldest();
                    *dropped += 1;
                }
            }
        }
    }
}

/// A spooled file's period.
fn parse(bytes: &[u8]) -> Result<Item, String> {
    let bad = || "not a spooled period".to_string();
    let line_end = memchr::memchr(b'\n', bytes).ok_or_else(bad)?;
    let line = std::str::from_utf8(&bytes[..line_end]).map_err(|_| bad())?;
    let mut fields = line.split(' ');
    if fields.next() != Some(MAGIC) {
        return Err(bad());
    }
    let mut next = || fields.next().ok_or_else(bad);
    let name = next()?.to_string();
    let from = next()?.parse().map_err(|_| bad())?;
    let until = next()?.parse().map_err(|_| bad())?;
    Ok(Item {
        name,
        from,
        until,
        payload: bytes[line_end + 1..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(from: u64, bytes: usize) -> Item {
        Item {
            name: "app%7B%7D".into(),
            from,
            until: from + 1,
            payload: vec![7; bytes],
        }
    }

    #[test]
    fn a_spool_keeps_the_newest_periods_within_its_bound_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spool");
        let path = path.to_str().unwrap();
        // Each period takes 1000 bytes and a header of 26: four fit in 4200 bytes.
        let mut backlog = Backlog::Disk(Spool::open(path, 4200).unwrap());
        let dropped: u64 = (1..=6).map(|from| backlog.add(item(from, 1000))).sum();
        assert_eq!((dropped, backlog.size().0), (2, 4));
        let mut unreadable = 0;
        let oldest = backlog.oldest(&mut unreadable).unwrap();
        assert_eq!(oldest, item(3, 1000));
        backlog.settle(oldest, false);
        assert_eq!(backlog.oldest(&mut unreadable).unwrap().from, 3);
        backlog.settle(item(3, 1000), true);
        drop(backlog);
        // A half-written file and a stranger are left alone or cleaned up.
        std::fs::write(dir.path().join("spool/.000000000099.tmp"), b"x").unwrap();
        std::fs::write(dir.path().join("spool/000000000000.period"), b"junk").unwrap();
        let mut backlog = Backlog::Disk(Spool::open(path, 4200).unwrap());
        let mut sent = Vec::new();
        while let Some(item) = backlog.oldest(&mut unreadable) {
            sent.push(item.from);
            backlog.settle(item, true);
        }
        assert_eq!((sent, unreadable), (vec![4, 5, 6], 1));
        assert_eq!(
            std::fs::read_dir(dir.path().join("spool")).unwrap().count(),
            0
        );
        assert_eq!(backlog.add(item(9, 5000)), 1, "larger than the bound");
        assert!(Spool::open("/proc/version/spool", 1000).is_err());
    }

    #[test]
    fn memory_keeps_the_newest_few() {
        let mut backlog = Backlog::Memory {
            periods: VecDeque::new(),
            max: 2,
        };
        let dropped: u64 = (1..=5).map(|from| backlog.add(item(from, 10))).sum();
        assert_eq!((dropped, backlog.size()), (3, (2, 20)));
        let mut unreadable = 0;
        let oldest = backlog.oldest(&mut unreadable).unwrap();
        assert_eq!(oldest.from, 4);
        backlog.settle(oldest, false);
        assert_eq!(backlog.oldest(&mut unreadable).unwrap().from, 4);
    }
}
