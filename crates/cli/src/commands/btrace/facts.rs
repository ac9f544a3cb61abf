//! What a script's `Sys.*` functions read of the JVM, without running code in it.

use std::time::Duration;

/// The JVM's facts for `Sys.*`: system properties over the attach protocol (asked once, on
/// first use), the environment from `/proc`, the start time, CPUs and heap from `/proc` and
/// the GC's perf counters. Nothing runs in the JVM but the attach listener's own
/// `properties` operation.
pub struct JvmFacts {
    pid: u32,
    timeout: Duration,
    properties: std::cell::OnceCell<Vec<(String, String)>>,
    environment: std::cell::OnceCell<Vec<(String, String)>>,
    /// The heap's initial and maximum sizes (`VM.flags`).
    heap_bounds: std::cell::OnceCell<Option<(i64, i64)>>,
}

impl JvmFacts {
    /// The facts of JVM `pid`, asked with `timeout`.
    pub fn new(pid: u32, timeout: Duration) -> JvmFacts {
        JvmFacts {
            pid,
            timeout,
            properties: std::cell::OnceCell::new(),
            environment: std::cell::OnceCell::new(),
            heap_bounds: std::cell::OnceCell::new(),
        }
    }

    /// The text the JVM answers to an attach command without arguments.
    fn ask(&self, command: &str) -> anyhow::Result<String> {
        self.ask_with(command, &[])
    }

    /// The text the JVM answers to an attach command.
    fn ask_with(&self, command: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut vm = jtap_attach::VirtualMachine::attach(
            self.pid,
            &jtap_attach::AttachOptions {
                timeout: self.timeout,
            },
        )?;
        let mut reply = vm.execute(&jtap_attach::Request::new(command, args.to_vec()))?;
        Ok(reply.output_to_string()?)
    }

    /// The system properties, asked once.
    fn all_properties(&self) -> &[(String, String)] {
        self.properties.get_or_init(|| {
            let text = self.ask("properties").unwrap_or_default();
            text.lines().filter_map(java_property).collect()
        })
    }

    /// The process's environment (`/proc/<pid>/environ`), read once.
    fn all_environment(&self) -> &[(String, String)] {
        self.environment.get_or_init(|| {
            std::fs::read(format!("/proc/{}/environ", self.pid))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .filter_map(|entry| {
                    let entry = String::from_utf8_lossy(entry);
                    let (k, v) = entry.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect()
        })
    }

    /// `InitialHeapSize` and `MaxHeapSize`, as `jcmd VM.flags` prints them.
    fn heap_bounds(&self) -> Option<(i64, i64)> {
        *self.heap_bounds.get_or_init(|| {
            let flags = self.ask_with("jcmd", &["VM.flags"]).ok()?;
            let flag = |name: &str| {
                flags.split_whitespace().find_map(|f| {
                    f.strip_prefix(&format!("-XX:{name}="))
                        .and_then(|v| v.parse::<i64>().ok())
                })
            };
            Some((flag("InitialHeapSize")?, flag("MaxHeapSize")?))
        })
    }
}

impl jtap_script::Facts for JvmFacts {
    fn property(&self, name: &str) -> Option<String> {
        self.all_properties()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn properties(&self) -> Vec<(String, String)> {
        self.all_properties().to_vec()
    }

    fn thread_dump(&self) -> Option<String> {
        self.ask("threaddump").ok()
    }

    fn getenv(&self, name: &str) -> Option<String> {
        self.all_environment()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn environment(&self) -> Vec<(String, String)> {
        self.all_environment().to_vec()
    }

    fn counter(&self, name: &str) -> Option<jtap_script::Counter> {
        // Read afresh on each call: the counters move.
        let process = jtap_attach::process::Process::open(self.pid).ok()?;
        let perf = jtap_attach::discovery::read_perf_data(&process)?;
        Some(match perf.get(name)? {
            jtap_attach::perfdata::PerfValue::Long(n) => jtap_script::Counter::Long(*n),
            jtap_attach::perfdata::PerfValue::Text(t) => jtap_script::Counter::Text(t.clone()),
        })
    }

    /// `utime` and `stime` of `/proc/<pid>/stat`, in clock ticks of 1/100 s (Linux's
    /// `USER_HZ`).
    fn cpu_time_ns(&self) -> Option<i64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The fields after the command's closing parenthesis: state is field 3, utime 14.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<i64>().ok();
        Some((ticks(11)? + ticks(12)?) * 10_000_000)
    }

    fn load_average(&self) -> Option<f64> {
        let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
        loadavg.split_whitespace().next()?.parse().ok()
    }

    fn start_time_ms(&self) -> Option<i64> {
        let uptime = jtap_attach::process::Process::open(self.pid)
            .ok()?
            .uptime_secs()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis() as i64;
        Some(now - (uptime * 1000.0) as i64)
    }

    fn processors(&self) -> Option<i64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
            .trim();
        // `0-3,6,8-9`.
        let count = list.split(',').try_fold(0i64, |n, range| {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            Some(n + b.trim().parse::<i64>().ok()? - a.trim().parse::<i64>().ok()? + 1)
        })?;
        Some(count)
    }

    fn heap(&self) -> Option<jtap_script::Heap> {
        let info = jtap_attach::JvmInfo::inspect(self.pid).ok()?;
        let committed = info.heap_committed? as i64;
        // The flags are exact; the perf counters' capacities overlap under G1, whose
        // generations each report the whole heap's.
        let (initial, max) = self
            .heap_bounds()
            .unwrap_or((committed, info.heap_max.map_or(committed, |m| m as i64)));
        Some(jtap_script::Heap {
            initial,
            used: info.heap_used? as i64,
            committed,
            max,
        })
    }

    fn pid(&self) -> i64 {
        i64::from(self.pid)
    }

    fn utc_offset_seconds(&self, epoch_secs: i64) -> i64 {
        crate::local_time::utc_offset_seconds(epoch_secs)
    }

    fn jcmd(&self, command: &[&str]) -> Result<String, String> {
        let line = command.join(" ");
        self.ask_with("jcmd", &[line.as_str()])
            .map_err(|e| e.to_string())
    }
}

/// One line of Java's properties format (`key=value`, with `\:`, `\=`, `\\` and `\uXXXX`
/// escapes), as the attach listener's `properties` prints them.
fn java_property(line: &str) -> Option<(String, String)> {
    if line.starts_with('#') {
        return None;
    }
    let unescape = |text: &str| {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match (c, c == '\\') {
                (_, false) => out.push(c),
                (_, true) => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).collect();
                        if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(c);
                        }
                    }
                    Some(other) => out.push(other),
                    None => {}
                },
            }
        }
        out
    };
    // The key ends at the first `=` not escaped.
    let mut escaped = false;
    let at = line.char_indices().find_map(|(i, c)| {
        let end = c == '=' && !escaped;
        escaped = c == '\\' && !escaped;
        end.then_some(i)
    })?;
    Some((unescape(&line[..at]), unescape(&line[at + 1..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_read_as_java_writes_them() {
        assert_eq!(
            java_property("java.home=/usr/lib/jvm/java-17"),
            Some(("java.home".into(), "/usr/lib/jvm/java-17".into()))
        );
        assert_eq!(
            java_property("line.separator=\\n"),
            Some(("line.separator".into(), "\n".into()))
        );
        assert_eq!(
            java_property("odd\\=key=C\\:\\\\x \\u00e9"),
            Some(("odd=key".into(), "C:\\x é".into()))
        );
        assert_eq!(java_property("#Tue Nov 24"), None);
    }
}
