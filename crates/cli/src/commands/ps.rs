//! `jtap ps`: list JVMs without attaching.

use comfy_table::{presets::NOTHING, Table};
use jtap_attach::{list_jvms, JvmInfo};

/// Prints every visible JVM as a table or as JSON lines... as one JSON array.
pub fn run(json: bool) -> anyhow::Result<i32> {
    let jvms = list_jvms();
    if json {
        println!("{}", serde_json::to_string_pretty(&jvms)?);
        return Ok(0);
    }
    let mut table = Table::new();
    table.load_preset(NOTHING).set_header([
        "PID",
        "NSPID",
        "USER",
        "JAVA",
        "UPTIME",
        "HEAP USED/COMMITTED",
        "MAIN",
    ]);
    for jvm in &jvms {
        table.add_row([
            jvm.pid.to_string(),
            jvm.ns_pid.map_or("-".into(), |p| p.to_string()),
            jvm.user.clone(),
            jvm.java_version.clone().unwrap_or_else(|| "?".into()),
            jvm.uptime_secs.map_or("?".into(), format_duration),
            heap(jvm),
            format!("{} {}", jvm.main, jvm.args).trim_end().to_string(),
        ]);
    }
    println!("{table}");
    Ok(0)
}

fn heap(jvm: &JvmInfo) -> String {
    match (jvm.heap_used, jvm.heap_committed) {
        (Some(u), Some(c)) => format!("{}/{}", mib(u), mib(c)),
        _ => "-".into(),
    }
}

fn mib(bytes: u64) -> String {
    format!("{}M", bytes / (1024 * 1024))
}

fn format_duration(secs: f64) -> String {
    let s = secs as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}
