//! Reading HotSpot's thread dump (the attach operation `threaddump -l -e`, what `jstack -l -e`
//! prints): each thread's name, native id, bytes allocated, state, frames and monitors, and
//! the deadlocks the JVM found. JDK 11 to 18 print the native id as `nid=0x1a2b`, JDK 19+ as
//! `nid=6699`.

use serde::Serialize;

/// One thread of a dump.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DumpedThread {
    /// The Java thread name (or the VM thread's, e.g. `GC Thread#0`).
    pub name: String,
    /// The native thread id (`nid`), as the JVM's own pid namespace numbers it.
    pub nid: u32,
    /// `java.lang.Thread.State` without its detail (`BLOCKED`), empty for VM threads.
    pub state: String,
    /// What the state line says in parentheses (`on object monitor`, `parking`), if anything.
    pub state_detail: String,
    /// Whether the thread is a daemon thread.
    pub daemon: bool,
    /// Bytes the thread allocated on the Java heap since it started (`allocated=1701K` with
    /// `-e`, to the unit printed), for Java threads.
    pub allocated: Option<u64>,
    /// Frames, innermost first, as printed after `at `.
    pub frames: Vec<String>,
    /// The monitor or synchronizer the thread waits to enter or acquire, if any.
    pub waiting_for: Option<Monitor>,
    /// Monitors and ownable synchronizers the thread holds.
    pub holds: Vec<Monitor>,
}

/// An object used as a lock: its address in the dump and its class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Monitor {
    /// `0x000000069ec17618`, as the dump prints it.
    pub address: String,
    /// The lock object's class (`java.lang.Object`).
    pub class: String,
}

/// A parsed thread dump.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadDump {
    /// Every thread, in the dump's order.
    pub threads: Vec<DumpedThread>,
    /// Each deadlock the JVM reported: the names of the threads in its cycle.
    pub deadlocks: Vec<Vec<String>>,
}

impl ThreadDump {
    /// Parses the text of `threaddump` (with or without `-l`).
    pub fn parse(text: &str) -> ThreadDump {
        let mut dump = ThreadDump::default();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with("Found one Java-level deadlock")
                || line.starts_with("Found a total of")
            {
                dump.deadlocks.push(deadlock_cycle(&mut lines));
            } else if let Some(thread) = thread_header(line) {
                dump.threads.push(thread);
            } else if let Some(thread) = dump.threads.last_mut() {
                thread_detail(thread, line);
            }
        }
        dump.deadlocks.retain(|cycle| !cycle.is_empty());
        dump
    }

    /// The thread holding the monitor at `address`, if the dump names one.
    pub fn holder_of(&self, address: &str) -> Option<&DumpedThread> {
        self.threads
            .iter()
            .find(|t| t.holds.iter().any(|m| m.address == address))
    }
}

/// `"name" #12 [2251] daemon prio=10 ... nid=0x8cb ...` (Java threads) or
/// `"GC Thread#0" os_prio=0 ... nid=0x8c3 runnable` (VM threads).
fn thread_header(line: &str) -> Option<DumpedThread> {
    let rest = line.strip_prefix('"')?;
    let nid_at = rest.find(" nid=")?;
    let name_end = rest[..nid_at].rfind('"')?;
    let attributes = &rest[name_end + 1..];
    let nid_text = attributes
        .split_whitespace()
        .find_map(|word| word.strip_prefix("nid="))?;
    let nid = match nid_text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => nid_text.parse().ok()?,
    };
    Some(DumpedThread {
        name: rest[..name_end].to_string(),
        nid,
        daemon: attributes.split_whitespace().any(|w| w == "daemon"),
        allocated: attributes
            .split_whitespace()
            .find_map(|word| byte_size(word.strip_prefix("allocated=")?)),
        ..DumpedThread::default()
    })
}

/// `1701K`, `141M`, `512B` (HotSpot's sizes in their proper unit) in bytes.
fn byte_size(text: &str) -> Option<u64> {
    let unit_at = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(unit_at);
    let shift = match unit {
        "B" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    number.parse::<u64>().ok().map(|n| n << shift)
}

/// A line under a thread's header: its state, a frame, or a monitor line.
fn thread_detail(thread: &mut DumpedThread, line: &str) {
    let line = line.trim();
    if let Some(state) = line.strip_prefix("java.lang.Thread.State: ") {
        let (name, detail) = state.split_once(' ').unwrap_or((state, ""));
        thread.state = name.to_string();
        thread.state_detail = detail.trim_matches(|c| c == '(' || c == ')').to_string();
    } else if let Some(frame) = line.strip_prefix("at ") {
        thread.frames.push(frame.to_string());
    } else if let Some(lock) = line.strip_prefix("- waiting to lock ") {
        thread.waiting_for = thread.waiting_for.take().or_else(|| monitor(lock));
    } else if let Some(lock) = line.strip_prefix("- parking to wait for ") {
        thread.waiting_for = thread.waiting_for.take().or_else(|| monitor(lock));
    } else if let Some(lock) = line.strip_prefix("- locked ") {
        thread.holds.extend(monitor(lock));
    } else if let Some(lock) = line.strip_prefix("- ") {
        // Under "Locked ownable synchronizers:": `- <0x...> (a ...ReentrantLock$NonfairSync)`.
        if lock.starts_with('<') {
            thread.holds.extend(monitor(lock));
        }
    }
}

/// `<0x000000069ec17618> (a java.lang.Object)`.
fn monitor(text: &str) -> Option<Monitor> {
    let text = text.trim();
    let address = text.strip_prefix('<')?.split('>').next()?;
    let class = text
        .split_once("(a ")
        .map(|(_, c)| c.trim_end_matches(')'))
        .unwrap_or("?");
    Some(Monitor {
        address: address.to_string(),
        class: class.to_string(),
    })
}

/// The thread names of one deadlock report: its `"name":` lines up to the stack section.
fn deadlock_cycle<'a>(lines: &mut impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut names = Vec::new();
    for line in lines {
        if line.starts_with("Java stack information") {
            break;
        }
        if let Some(name) = line.strip_prefix('"').and_then(|l| l.strip_suffix("\":")) {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const JDK11: &str = r#"
"worker" #12 prio=5 os_prio=0 cpu=2.5ms elapsed=3.1s tid=0x00007f tid nid=0x1a2b waiting for monitor entry  [0x0]
   java.lang.Thread.State: BLOCKED (on object monitor)
	at workloads.X.run(X.java:10)
	- waiting to lock <0x00000000aa> (a java.lang.Object)
	at java.lang.Thread.run(Thread.java:829)

"holder" #13 daemon prio=5 os_prio=0 cpu=1ms elapsed=3s allocated=1701K defined_classes=505 tid=0x1 nid=0x1a2c waiting on condition  [0x0]
   java.lang.Thread.State: TIMED_WAITING (sleeping)
	at java.lang.Thread.sleep(Native Method)
	- locked <0x00000000aa> (a java.lang.Object)

   Locked ownable synchronizers:
	- <0x00000000bb> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)

"GC Thread#0" os_prio=0 cpu=1ms elapsed=3s tid=0x2 nid=0x1a00 runnable

Found one Java-level deadlock:
=============================
"a":
  waiting to lock monitor 0x1 (object 0x2, a java.lang.Object),
  which is held by "b"
"b":
  waiting to lock monitor 0x3 (object 0x4, a java.lang.Object),
  which is held by "a"

Java stack information for the threads listed above:
===================================================
"a":
	at X.y(X.java:1)
"#;

    #[test]
    fn reads_threads_locks_and_deadlocks() {
        let dump = ThreadDump::parse(JDK11);
        let names: Vec<&str> = dump.threads.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["worker", "holder", "GC Thread#0"]);
        let worker = &dump.threads[0];
        assert_eq!((worker.nid, worker.state.as_str()), (0x1a2b, "BLOCKED"));
        assert_eq!(worker.state_detail, "on object monitor");
        assert_eq!(worker.frames.len(), 2);
        let lock = worker.waiting_for.as_ref().expect("waits");
        assert_eq!(dump.holder_of(&lock.address).map(|t| t.nid), Some(0x1a2c));
        assert!(dump.threads[1].daemon);
        assert_eq!(worker.allocated, None);
        assert_eq!(dump.threads[1].allocated, Some(1701 << 10));
        assert_eq!(byte_size("141M"), Some(141 << 20));
        assert_eq!(byte_size("512B"), Some(512));
        assert_eq!(dump.threads[1].holds.len(), 2);
        assert_eq!(dump.deadlocks, vec![vec!["a".to_string(), "b".to_string()]]);
    }

    #[test]
    fn reads_decimal_native_ids_and_names_with_quotes_inside() {
        let line = r#""say "hi"" #3 [2242] prio=5 os_prio=0 tid=0x7f nid=2242 runnable  [0x0]"#;
        let thread = thread_header(line).expect("a header");
        assert_eq!((thread.name.as_str(), thread.nid), ("say \"hi\"", 2242));
    }
}
