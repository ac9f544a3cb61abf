//! What the client tells handlers of the JVM, read without running code in it.

/// What the client can tell of the JVM for `Sys.*` functions, read without running code in
/// it (system properties over the attach protocol, the environment from `/proc`, the GC's
/// perf counters).
pub trait Facts {
    /// A system property.
    fn property(&self, name: &str) -> Option<String>;
    /// An environment variable of the JVM's process.
    fn getenv(&self, name: &str) -> Option<String>;
    /// When the JVM started, milliseconds since the Unix epoch.
    fn start_time_ms(&self) -> Option<i64>;
    /// Processors the JVM may use.
    fn processors(&self) -> Option<i64>;
    /// The Java heap's sizes.
    fn heap(&self) -> Option<Heap>;
    /// The JVM's process id.
    fn pid(&self) -> i64;
    /// Seconds east of UTC of the local time zone at `epoch_secs`.
    fn utc_offset_seconds(&self, epoch_secs: i64) -> i64;
    /// Runs a diagnostic command in the JVM (`GC.run`, `GC.heap_dump`: operations of the VM,
    /// no application code) and gives its output, or why it failed.
    fn jcmd(&self, command: &[&str]) -> Result<String, String>;
    /// The JVM's thread dump, as `jstack` prints it (the attach protocol's `threaddump`: a
    /// safepoint operation of the VM, no Java code runs).
    fn thread_dump(&self) -> Option<String>;
    /// A counter of the JVM's perf data (`hsperfdata`: `java.threads.live`, `sun.gc.*`,
    /// `java.property.*`).
    fn counter(&self, name: &str) -> Option<Counter>;
    /// Every system property, in the order the JVM lists them.
    fn properties(&self) -> Vec<(String, String)>;
    /// The JVM's process environment.
    fn environment(&self) -> Vec<(String, String)>;
    /// CPU time the JVM's process has used, in nanoseconds.
    fn cpu_time_ns(&self) -> Option<i64>;
    /// The system's load average over the last minute.
    fn load_average(&self) -> Option<f64>;
}

/// A perf data counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counter {
    /// A number (ticks, bytes, events).
    Long(i64),
    /// Text.
    Text(String),
}

/// The Java heap's sizes in bytes, as `java.lang.management.MemoryUsage` has them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heap {
    /// What the JVM asked for at start-up (`InitialHeapSize`).
    pub initial: i64,
    /// Used.
    pub used: i64,
    /// Committed.
    pub committed: i64,
    /// The most it may grow to (`MaxHeapSize`).
    pub max: i64,
}

impl Heap {
    /// As `MemoryUsage.toString()` writes it.
    pub fn describe(&self) -> String {
        let part = |name: &str, v: i64| format!("{name} = {v}({}K)", v >> 10);
        [
            part("init", self.initial),
            part("used", self.used),
            part("committed", self.committed),
            part("max", self.max),
        ]
        .join(" ")
    }
}
