//! Threads of this process: listing them, their names, and per-thread timers that follow
//! threads as they start and end (JVMTI ThreadStart/ThreadEnd run on the thread itself).

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::jvm;
use crate::thread::Vm;
use crate::walk::{vthread_label, Mounted};

/// Prefix of the agent's own threads, which are never sampled.
pub const OWN_THREAD_PREFIX: &str = "jtap-";

/// Kernel ids of this process's threads.
pub fn tasks() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The kernel's name of a thread (HotSpot gives Java threads their Java name, cut to 15
/// bytes), if it still exists.
pub fn kernel_name(tid: i32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
    Some(name.trim_end_matches('\n').to_string())
}

/// The calling thread's kernel id, asked of the kernel once per thread: a traced method
/// reporting every call wants it each time, and a `gettid` system call cost ~40 % of such a
/// call. (A thread keeps its id for life; the agent never runs in a forked child, whose
/// only thread would have a new one: the JVM forks only to exec.) Not for signal handlers,
/// whose first access to a thread-local may allocate.
pub fn current_tid() -> i32 {
    thread_local! {
        static TID: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
    }
    TID.with(|cached| {
        if cached.get() == 0 {
            // SAFETY: gettid has no preconditions.
            cached.set(unsafe { libc::syscall(libc::SYS_gettid) as i32 });
        }
        cached.get()
    })
}

/// A per-thread source of profiling signals (a perf_event counter, a POSIX CPU-clock timer).
pub trait ThreadTimer: Send {
    /// Starts signalling thread `tid`.
    fn arm(&mut self, tid: i32) -> io::Result<()>;
    /// Stops signalling thread `tid` and frees what it held.
    fn disarm(&mut self, tid: i32);
}

struct Armed {
    timer: Box<dyn ThreadTimer>,
    tids: HashSet<i32>,
    failures: u64,
}

static ARMED: Mutex<Option<Armed>> = Mutex::new(None);

/// The agent's own threads that announced themselves (ThreadStart) while a sampler ran:
/// a thread may be listed before it has renamed itself, so its name alone cannot tell.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

fn own_threads() -> std::sync::MutexGuard<'static, Option<HashSet<i32>>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Arms `timer` on every thread of the process except the agent's own, then keeps it armed
/// on threads that start later ([`thread_started`]). Fails if it cannot arm even the calling
/// thread's siblings at all.
pub fn arm_all(mut timer: Box<dyn ThreadTimer>) -> Result<usize, String> {
    // Locked throughout: a thread starting meanwhile waits in `thread_started`, then finds
    // itself armed already or gets armed there.
    let mut armed = lock();
    let mut tids = HashSet::new();
    let mut first_error = None;
    let own = own_threads().clone().unwrap_or_default();
    for tid in tasks() {
        if own.contains(&tid) || kernel_name(tid).is_some_and(|n| n.starts_with(OWN_THREAD_PREFIX))
        {
            continue;
        }
        match timer.arm(tid) {
            Ok(()) => {
                tids.insert(tid);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if tids.is_empty() {
        return Err(first_error
            .map(|e| e.to_string())
            .unwrap_or_else(|| "no threads to sample".into()));
    }
    let count = tids.len();
    *armed = Some(Armed {
        timer,
        tids,
        failures: 0,
    });
    Ok(count)
}

/// Disarms every thread and drops the timer. Returns how many threads could not be armed
/// as they started.
pub fn disarm_all() -> u64 {
    *own_threads() = None;
    let Some(mut armed) = lock().take() else {
        return 0;
    };
    for tid in armed.tids.drain() {
        armed.timer.disarm(tid);
    }
    armed.failures
}

/// ThreadStart: arm the new (calling) thread, unless it is one of the agent's — which is
/// disarmed instead, in case [`arm_all`] listed it before it had its name.
pub fn thread_started(tid: i32, name: &str) {
    if name.starts_with(OWN_THREAD_PREFIX) {
        own_threads().get_or_insert_with(HashSet::new).insert(tid);
        thread_ended(tid);
        return;
    }
    if let Some(armed) = lock().as_mut() {
        if armed.tids.contains(&tid) {
            return;
        }
        match armed.timer.arm(tid) {
            Ok(()) => {
                armed.tids.insert(tid);
            }
            Err(_) => armed.failures += 1,
        }
    }
}

/// ThreadEnd: disarm the ending (calling) thread.
pub fn thread_ended(tid: i32) {
    if let Some(armed) = lock().as_mut() {
        if armed.tids.remove(&tid) {
            armed.timer.disarm(tid);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Armed>> {
    ARMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Names of sampled threads by kernel id: from ThreadStart (full Java names) or else the
/// kernel's name, looked up once.
#[derive(Default)]
pub struct ThreadNames {
    names: Mutex<HashMap<i32, String>>,
    /// Threads known to be Java threads: started under the sampler, or matched by name.
    java: Mutex<HashSet<i32>>,
}

/// HotSpot gives a Java thread its name as the kernel's name, cut to this many bytes.
const KERNEL_NAME_BYTES: usize = 15;

impl ThreadNames {
    /// Records the Java name of a thread that just started.
    pub fn started(&self, tid: i32, name: String) {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tid, name);
        self.java
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tid);
    }

    /// Learns which threads that ran before the sampler are Java threads, and their full
    /// names: a thread's kernel name is its Java name cut to 15 bytes, so a thread whose
    /// kernel name some Java name starts with (equals, when shorter) is a Java thread, and
    /// when exactly one does, that is its name. When several do (`qtp1642360923-14`,
    /// `qtp1642360923-15`, ...), the thread is one of them and keeps its kernel name.
    pub fn adopt(&self, java_names: &[String], tasks: &[(i32, String)]) {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let mut java = self.java.lock().unwrap_or_else(|e| e.into_inner());
        for (tid, kernel) in tasks {
            let mut matching = java_names.iter().filter(|name| {
                if kernel.len() < KERNEL_NAME_BYTES {
                    *name == kernel
                } else {
                    name.starts_with(kernel.as_str())
                }
            });
            match (matching.next(), matching.next()) {
                (Some(name), None) => {
                    names.insert(*tid, name.clone());
                    java.insert(*tid);
                }
                (Some(_), Some(_)) => {
                    java.insert(*tid);
                }
                (None, _) => {}
            }
        }
    }

    /// Whether `tid` is known to be a Java thread.
    pub fn is_java(&self, tid: i32) -> bool {
        self.java
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&tid)
    }

    /// The thread's name (empty when it has none, or is gone and was never seen).
    pub fn name(&self, tid: i32) -> String {
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names
            .entry(tid)
            .or_insert_with(|| kernel_name(tid).unwrap_or_default())
            .clone()
    }

    /// The thread's name, `[name tid=N]` style.
    pub fn label(&self, tid: i32) -> String {
        let name = self.name(tid);
        if name.is_empty() {
            format!("[tid={tid}]")
        } else {
            format!("[{name} tid={tid}]")
        }
    }
}

/// Names of the virtual threads samples ran, by id: read by the signal handler where it can,
/// otherwise asked of the JDK (see [`jvm::virtual_thread_names`]) on the processing thread,
/// at most once every [`ASK_EVERY`]. A name the handler could not read and the JDK no longer
/// knows (the thread has ended) leaves the thread unnamed.
pub struct VirtualNames {
    vm: Vm,
    known: HashMap<u64, String>,
    asked: Option<Instant>,
}

/// How often the JDK is asked for virtual threads' names, at most.
const ASK_EVERY: Duration = Duration::from_secs(2);
/// Most virtual threads' names kept: a JDK asked lists them all, perhaps millions.
const MOST_VIRTUAL_NAMES: usize = 100_000;

impl VirtualNames {
    /// For the processing thread of `vm` (attached to it).
    pub fn new(vm: Vm) -> VirtualNames {
        VirtualNames {
            vm,
            known: HashMap::new(),
            asked: None,
        }
    }

    /// How the JDK shows the virtual thread `mounted`: `VirtualThread[#21,worker-3]`.
    pub fn label(&mut self, mounted: &Mounted) -> String {
        if let Some(name) = mounted.name() {
            if self.known.len() < MOST_VIRTUAL_NAMES && !self.known.contains_key(&mounted.id) {
                self.known.insert(mounted.id, name.to_string());
            }
            return vthread_label(mounted.id, name);
        }
        if !self.known.contains_key(&mounted.id)
            && self.asked.is_none_or(|at| at.elapsed() >= ASK_EVERY)
        {
            self.asked = Some(Instant::now());
            self.known = jvm::virtual_thread_names(self.vm, MOST_VIRTUAL_NAMES)
                .into_iter()
                .collect();
        }
        vthread_label(mounted.id, self.known.get(&mounted.id).map_or("", |n| n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_own_threads_with_names() {
        let tid = current_tid();
        assert!(tasks().contains(&tid));
        assert!(kernel_name(tid).is_some());
        let names = ThreadNames::default();
        names.started(tid, "main worker".into());
        assert_eq!(names.label(tid), format!("[main worker tid={tid}]"));
        assert_eq!(names.label(i32::MAX), format!("[tid={}]", i32::MAX));
        assert!(names.is_java(tid));
    }

    #[test]
    fn java_names_replace_cut_kernel_names_when_unambiguous() {
        let names = ThreadNames::default();
        let java: Vec<String> = [
            "main",
            "http-nio-8080-exec-1",
            "pool-1-thread-10",
            "pool-1-thread-11",
            "worker",
        ]
        .map(String::from)
        .to_vec();
        let tasks: Vec<(i32, String)> = [
            (1, "main"),
            (2, "http-nio-8080-e"),
            (3, "pool-1-thread-1"),
            (4, "GC Thread#0"),
            (5, "worker"),
        ]
        .map(|(t, n)| (t, n.to_string()))
        .to_vec();
        names.adopt(&java, &tasks);
        assert_eq!(names.label(2), "[http-nio-8080-exec-1 tid=2]");
        assert_eq!(names.label(1), "[main tid=1]");
        // Two Java names start with the cut name: a Java thread, but which one is unknown.
        assert!(names.is_java(3));
        assert!(!names.is_java(4) && names.is_java(5) && names.is_java(2));
    }
}
