#!/usr/bin/env bash
# Profiler overhead benchmark. Builds jtap and its agent in release mode, runs a CPU-bound
# workload (tests/java/workloads/Throughput.java, two threads hashing arrays, reporting its
# operations every 100 ms) and, in the same JVM run, alternates unprofiled windows with
# profiled ones for cpu (native frames by DWARF unwinding, the default, and by frame pointers
# only: cpu-fp), itimer and wall at 10 ms and 1 ms. Prints:
#   - throughput with and without profiling per engine and interval, as operations per
#     second and per CPU second of the whole JVM (agent threads and signal handlers
#     included), and the overhead: the loss in operations per CPU second, which stays
#     meaningful on a machine whose other load changes the JVM's share of the cores (each
#     profiled window is compared with the mean of the unprofiled windows around it);
#   - the JVM's RSS before and at most during a long profile at 1 ms (BENCH_LONG seconds,
#     default 60);
#   - the highest sample rate the cpu engine sustains without dropping samples.
# Environment: JAVA (default JDK 17), BENCH_WINDOW (seconds per window, default 5),
# BENCH_LONG (seconds of the RSS run, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA=${JAVA:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}
WINDOW=${BENCH_WINDOW:-5}
LONG=${BENCH_LONG:-60}
source scripts/lib.sh
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" tests/java/workloads/Throughput.java tests/java/workloads/OpsReport.java
"$JAVA" -cp "$work/classes" workloads.Throughput 2 >"$work/ops.log" &
pid=$!
until grep -q READY "$work/ops.log"; do sleep 0.1; done
now_ms() { date +%s%3N; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
# utime + stime of the whole JVM, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }

echo "JVM: $("$JAVA" -version 2>&1 | head -1); cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "warming up for $((WINDOW * 2)) s..."
sleep $((WINDOW * 2))
# Loads the agent once (its first attach and the class preparation are not what we measure).
"$JTAP" profile "$pid" -e itimer -d 1s --format summary >/dev/null

windows=()   # "label start-ms end-ms start-ticks end-ticks"
baseline() {
    local start cpu; start=$(now_ms); cpu=$(cpu_ticks)
    sleep "$WINDOW"
    windows+=("base $start $(now_ms) $cpu $(cpu_ticks)")
}
profiled() {
    local engine=$1 interval=$2 start cpu events=(-e "$1")
    [[ $engine == cpu-fp ]] && events=(-e cpu --cstack fp)
    start=$(now_ms); cpu=$(cpu_ticks)
    "$JTAP" profile "$pid" "${events[@]}" -i "$interval" -d "${WINDOW}s" --format summary >"$work/$engine-$interval.txt"
    windows+=("$engine@$interval $start $(now_ms) $cpu $(cpu_ticks)")
}
baseline
for engine in cpu cpu-fp itimer wall; do
    for interval in 10ms 1ms; do
        profiled "$engine" "$interval"
        baseline
    done
done

rss_before=$(rss_kib)
"$JTAP" profile "$pid" -e cpu -i 1ms -d "${LONG}s" --format summary >"$work/long.txt" &
long=$!
rss_max=$rss_before
while kill -0 $long 2>/dev/null; do
    rss=$(rss_kib); ((rss > rss_max)) && rss_max=$rss
    sleep 0.5
done
rss_after=$(rss_kib)

for interval in 1ms 500us 200us 100us 50us; do
    "$JTAP" profile "$pid" -e cpu -i "$interval" -d 3s --format summary >"$work/rate-$interval.txt"
done

python3 - "$work" "$(getconf CLK_TCK)" "${windows[@]}" <<'PY'
import re, sys
work, hz, windows = sys.argv[1], int(sys.argv[2]), [w.split() for w in sys.argv[3:]]
points = []
for line in open(f"{work}/ops.log"):
    if line.startswith("ops "):
        _, t, n = line.split()
        points.append((int(t), int(n)))

def rates(window):
    """(operations per second, operations per CPU second) in a window."""
    start, end, cpu0, cpu1 = map(int, window[1:5])
    inside = [(t, n) for t, n in points if start <= t <= end]
    if len(inside) < 2:
        return float("nan"), float("nan")
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    ops = n1 - n0
    # Scale the CPU time to the reported span of the window.
    cpu_seconds = (cpu1 - cpu0) / hz * (t1 - t0) / max(1, end - start)
    return ops * 1000.0 / (t1 - t0), ops / cpu_seconds if cpu_seconds else float("nan")

def summary(path):
    text = open(path).read()
    get = lambda key: int(re.search(rf"^{key}\s*:\s*(\d+)", text, re.M).group(1))
    return get("Total samples"), get("Dropped samples"), float(re.search(r"^Duration\s*:\s*([\d.]+)", text, re.M).group(1))

print()
print(f"{'engine':<8} {'interval':>8} {'ops/s':>11} {'ops/s base':>11} {'ops/CPU-s':>11} {'base':>11} {'overhead':>9} {'samples/s':>10} {'dropped':>8}")
for i, window in enumerate(windows):
    if window[0] == "base":
        continue
    (b1, e1), (b2, e2) = rates(windows[i - 1]), rates(windows[i + 1])
    ops, efficiency = rates(window)
    base_ops, base_efficiency = (b1 + b2) / 2, (e1 + e2) / 2
    engine, interval = window[0].split("@")
    samples, dropped, duration = summary(f"{work}/{engine}-{interval}.txt")
    print(f"{engine:<8} {interval:>8} {ops:>11,.0f} {base_ops:>11,.0f} {efficiency:>11,.0f} {base_efficiency:>11,.0f} "
          f"{100 * (1 - efficiency / base_efficiency):>8.2f}% {samples / duration:>10,.0f} {dropped:>8}")

print()
best = None
for interval in ["1ms", "500us", "200us", "100us", "50us"]:
    samples, dropped, duration = summary(f"{work}/rate-{interval}.txt")
    print(f"cpu at {interval:>5}: {samples / duration:>8,.0f} samples/s, {dropped} dropped")
    if dropped == 0:
        best = (interval, samples / duration)
if best:
    print(f"highest rate without drops: {best[1]:,.0f} samples/s (cpu, interval {best[0]}, 2 busy threads)")
PY
samples=$(awk -F': ' '/^Total samples/ {print $2}' "$work/long.txt")
echo
echo "RSS during a ${LONG} s cpu profile at 1 ms ($samples samples): before $rss_before KiB, max $rss_max KiB (+$((rss_max - rss_before)) KiB), after $rss_after KiB"
