//! Attach latency against real JVMs: first attach (listener started by SIGQUIT) and later
//! round trips. The first `properties` in a JVM's life runs Java code that loads and
//! initialises classes (tens of ms, JVM side); `threaddump` shows the attach cost itself.
//! Prints a table of median and p90 per JDK; run with
//! `cargo bench -p jtap-attach --bench attach_latency`.

use std::time::{Duration, Instant};

use jtap_attach::{AttachOptions, Request, VirtualMachine};
use jtap_testkit::{jdks, JavaProcess};

const RUNS: usize = 30;

fn main() {
    println!(
        "{:<6} {:<34} {:>5} {:>10} {:>10}",
        "JDK", "measurement", "runs", "median", "p90"
    );
    for jdk in jdks() {
        for operation in ["threaddump", "properties"] {
            let mut first = Vec::new();
            for _ in 0..RUNS {
                let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
                let pid = jvm.pid();
                // Let start-up work (JIT, class loading) settle, as on a JVM that has been running.
                std::thread::sleep(Duration::from_millis(300));
                let started = Instant::now();
                let mut vm =
                    VirtualMachine::attach(pid, &AttachOptions::default()).expect("attach");
                let mut reply = vm
                    .execute(&Request::new(operation, Vec::<String>::new()))
                    .expect(operation);
                reply.output_to_string().expect("read");
                first.push(started.elapsed());
            }
            report(
                jdk.version,
                &format!("first attach + {operation}"),
                &mut first,
            );
        }

        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let mut vm = VirtualMachine::attach(jvm.pid(), &AttachOptions::default()).expect("attach");
        for operation in ["properties", "threaddump"] {
            let mut times = Vec::new();
            for _ in 0..RUNS * 3 {
                let started = Instant::now();
                let mut reply = vm
                    .execute(&Request::new(operation, Vec::<String>::new()))
                    .expect(operation);
                reply.output_to_string().expect("read");
                times.push(started.elapsed());
            }
            report(jdk.version, &format!("round trip: {operation}"), &mut times);
        }
    }
}

fn report(jdk: u32, what: &str, times: &mut [Duration]) {
    times.sort();
    let pick = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{:<6} {:<34} {:>5} {:>8.2}ms {:>8.2}ms",
        jdk,
        what,
        times.len(),
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.9).as_secs_f64() * 1e3
    );
}
