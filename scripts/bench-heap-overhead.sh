#!/usr/bin/env bash
# Overhead of the alloc and lock engines. Builds jtap and its agent in release mode and, for
# every JDK asked for, runs two workloads that report their own throughput every 100 ms:
#   - tests/java/workloads/AllocThroughput.java (2 threads allocating short-lived objects of
#     mixed sizes from a few sites), profiled with `-e alloc` (stacks by jtap's own walker),
#     `-e alloc --walker jvmti` (stacks by JVMTI's GetStackTrace), `-e alloc --live` and a
#     leak window (`jtap sites --leaks`: live sampled objects aged in collections) at
#     --alloc-interval ALLOC (default 512k), and with ASPROF set (bin/asprof of
#     ../shared/anchors/async-profiler) by async-profiler's `-e alloc --alloc ALLOC` in the same
#     JVM run (skipped, saying so, when ASPROF is unset);
#   - tests/java/workloads/NativeThroughput.java (2 threads creating, using and ending zlib
#     Deflaters: ~270 KiB of malloc/calloc per operation), profiled with `-e nativemem` and
#     `-e nativemem --live` at --nativemem-interval ALLOC, and with ASPROF set by
#     async-profiler's `-e nativemem --nativemem ALLOC` (workload "native");
#   - tests/java/workloads/LockThroughput.java (4 threads, one contended lock, one uncontended
#     lock each), profiled with `-e lock` at --lock-threshold LOCK (default 10us), twice: with
#     monitors (`synchronized`, JVMTI monitor events) and with ReentrantLocks (LockThroughput-
#     reentrant: parks, timed by the hook jtap binds to Unsafe.park).
# In one JVM run per workload it alternates unprofiled windows with profiled ones (ROUNDS of
# each setting, default 5, of BENCH_WINDOW seconds, default 5), like scripts/bench-profile.sh.
# Each profiled window is compared with the mean of the unprofiled windows on either side, in
# operations per second and in operations per CPU second of the whole JVM (agent included;
# this stays meaningful when other load on the machine changes the JVM's share of the cores).
# Prints a Markdown table: medians over the rounds, the overhead (loss in operations per CPU
# second; median, and min..max over the rounds), and what the profile recorded per second
# (alloc: estimated bytes and objects allocated, samples = bytes / interval, and the overhead's
# CPU time per sample, which is what makes the overhead grow with the allocation rate; lock: waits
# of at least the threshold and the time waited). With perf, also the CPU time the JVM's
# JIT-compiled code lost (its share of the JVM's CPU samples, relative to the base windows):
# the same quantity measured from where the CPU went, which other load disturbs much less.
# Environment: BENCH_JDKS (default "17 25"), BENCH_WORKLOADS (default "alloc native lock"), BENCH_WINDOW,
# ROUNDS, ALLOC, LOCK, BENCH_ALLOC_FRAMES (frames AllocThroughput adds under its loop, default 0:
# stacks of 7 frames; the alloc engine's cost per sample grows with the frames it walks).
set -euo pipefail
cd "$(dirname "$0")/.."
JDKS=${BENCH_JDKS:-17 25}
WINDOW=${BENCH_WINDOW:-5}
ROUNDS=${ROUNDS:-5}
ALLOC=${ALLOC:-512k}
LOCK=${LOCK:-10us}
WORKLOADS=${BENCH_WORKLOADS:-alloc native lock}
FRAMES=${BENCH_ALLOC_FRAMES:-0}
cargo build --release --quiet -p jtap-agent -p jtap-cli
JTAP=$PWD/target/release/jtap
export JTAP_AGENT=$PWD/target/release/libjtap_agent.so
work=$(mktemp -d)
pid=
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" \
    tests/java/workloads/AllocThroughput.java tests/java/workloads/LockThroughput.java \
    tests/java/workloads/NativeThroughput.java tests/java/workloads/OpsReport.java

java_home() {
    local v=$1 home
    for home in ".cache/jdks/jdk$v" "/usr/lib/jvm/java-$v-openjdk-amd64" "/usr/lib/jvm/temurin-$v-jdk-amd64"; do
        if [[ -x "$home/bin/java" ]] && grep -q "JAVA_VERSION=\"$v" "$home/release" 2>/dev/null; then
            echo "$home"
            return
        fi
    done
}

now_ms() { date +%s%3N; }
# utime + stime of the whole JVM, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }

# With perf (BENCH_PERF=0 turns it off), each window also samples the JVM's CPU at 499 Hz,
# for the share of its CPU time spent in JIT-compiled Java code: the work the profiler
# takes time from. Less sensitive to other load on the machine than the throughput.
PERF=${BENCH_PERF:-1}
if [[ $PERF == 1 ]] && ! perf record -q -o "$work/probe.data" -- true >/dev/null 2>&1; then
    PERF=0
fi
# Percent of the samples in JIT-compiled code (perf names it [JIT]); "-" without perf.
jit_share() {
    if [[ $PERF == 1 ]]; then
        perf report -i "$1" --sort dso --stdio 2>/dev/null | awk '/\[JIT\]/ {s += $1} END {print s + 0}'
    else
        echo -
    fi
}

windows=() # "jdk workload label start-ms end-ms start-ticks end-ticks summary jit-share"
window() {
    local jdk=$1 workload=$2 label=$3 start cpu perf_pid= file
    shift 3
    file=$work/$jdk-$workload-$label-${#windows[@]}
    start=$(now_ms)
    cpu=$(cpu_ticks)
    if [[ $PERF == 1 ]]; then
        perf record -q -F 499 -p "$pid" -o "$file.perf" -- sleep "$WINDOW" >/dev/null 2>&1 &
        perf_pid=$!
    fi
    if [[ $label == base ]]; then
        sleep "$WINDOW"
    elif [[ $label == asprof* ]]; then
        "$ASPROF" "$@" -d "$WINDOW" "$pid" >"$file.txt" 2>&1
    elif [[ $label == leaks* ]]; then
        "$JTAP" sites "$pid" --leaks "$@" -d "${WINDOW}s" >"$file.txt"
    else
        "$JTAP" profile "$pid" "$@" -d "${WINDOW}s" --format summary >"$file.txt"
    fi
    local end=$(now_ms) ticks=$(cpu_ticks)
    [[ -n $perf_pid ]] && wait "$perf_pid"
    windows+=("$jdk $workload $label $start $end $cpu $ticks $file.txt $(jit_share "$file.perf")")
}

# Runs one workload on one JDK: warm-up, then base and profiled windows in turn.
# Arguments: jdk home name (the workload's name in the table) class "class arguments", then
# "label:jtap arguments" per setting.
run() {
    local jdk=$1 home=$2 workload=$3 class=$4 arguments=$5 round setting
    shift 5
    # shellcheck disable=SC2086 # the workload's arguments are words
    "$home/bin/java" -Xms512m -Xmx512m -cp "$work/classes" "workloads.$class" $arguments >"$work/$jdk-$workload.log" 2>"$work/$jdk-$workload.err" &
    pid=$!
    until grep -q READY "$work/$jdk-$workload.log"; do sleep 0.1; done
    sleep $((WINDOW * 2))
    # Loads the agent once and warms up the engines (not what we measure).
    for setting in "$@"; do
        if [[ $setting == asprof* ]]; then
            # shellcheck disable=SC2086
            "$ASPROF" ${setting#*:} -d 1 "$pid" >/dev/null 2>&1
        elif [[ $setting == leaks* ]]; then
            # shellcheck disable=SC2086
            "$JTAP" sites "$pid" --leaks ${setting#*:} -d 1s >/dev/null
        else
            # shellcheck disable=SC2086
            "$JTAP" profile "$pid" ${setting#*:} -d 1s --format summary >/dev/null
        fi
    done
    window "$jdk" "$workload" base
    for ((round = 0; round < ROUNDS; round++)); do
        for setting in "$@"; do
            # shellcheck disable=SC2086
            window "$jdk" "$workload" "${setting%%:*}" ${setting#*:}
            window "$jdk" "$workload" base
        done
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
}

[[ -n "${ASPROF:-}" ]] || echo "ASPROF is not set: async-profiler's alloc rows are skipped"
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, ${ROUNDS} rounds; AllocThroughput frames added: $FRAMES"
for jdk in $JDKS; do
    home=$(java_home "$jdk")
    [[ -n "$home" ]] || { echo "JDK $jdk not found" >&2; continue; }
    echo "JDK $jdk: $("$home/bin/java" -version 2>&1 | head -1)"
    if [[ " $WORKLOADS " == *" alloc "* ]]; then
        settings=("alloc@$ALLOC:-e alloc --alloc-interval $ALLOC" "jvmti@$ALLOC:-e alloc --walker jvmti --alloc-interval $ALLOC" "live@$ALLOC:-e alloc --live --alloc-interval $ALLOC" "leaks@$ALLOC:--alloc-interval $ALLOC")
        [[ -n "${ASPROF:-}" ]] && settings+=("asprof@$ALLOC:-e alloc --alloc $ALLOC")
        run "$jdk" "$home" AllocThroughput AllocThroughput "2 $FRAMES" "${settings[@]}"
    fi
    if [[ " $WORKLOADS " == *" native "* ]]; then
        settings=("nativemem@$ALLOC:-e nativemem --nativemem-interval $ALLOC" "nativemem-live@$ALLOC:-e nativemem --live --nativemem-interval $ALLOC")
        [[ -n "${ASPROF:-}" ]] && settings+=("asprof-nativemem@$ALLOC:-e nativemem --nativemem $ALLOC")
        run "$jdk" "$home" NativeThroughput NativeThroughput 2 "${settings[@]}"
    fi
    if [[ " $WORKLOADS " == *" lock "* ]]; then
        run "$jdk" "$home" LockThroughput LockThroughput 4 "lock@$LOCK:-e lock --lock-threshold $LOCK"
        run "$jdk" "$home" LockThroughput-reentrant LockThroughput "4 reentrant" "lock@$LOCK:-e lock --lock-threshold $LOCK"
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work" "$(getconf CLK_TCK)" "${windows[@]}" <<'PY'
import re, statistics, sys
work, hz, windows = sys.argv[1], int(sys.argv[2]), [w.split() for w in sys.argv[3:]]
logs = {}

def points(jdk, workload):
    if (jdk, workload) not in logs:
        logs[jdk, workload] = [tuple(map(int, line.split()[1:])) for line in open(f"{work}/{jdk}-{workload}.log") if line.startswith("ops ")]
    return logs[jdk, workload]

def cpu_per_second(window):
    """CPU seconds the JVM used per second of a window."""
    start, end, cpu0, cpu1 = map(int, window[3:7])
    return (cpu1 - cpu0) / hz / max(1e-3, (end - start) / 1000)

def interval_bytes(label):
    """The alloc interval in a label like alloc@512k, in bytes."""
    value = label.split("@")[1].lower()
    scale = {"k": 2**10, "m": 2**20, "g": 2**30}.get(value[-1], 1)
    return float(value.rstrip("kmg")) * scale

def rates(window):
    """(operations per second, operations per CPU second) in a window."""
    jdk, workload = window[0], window[1]
    start, end, cpu0, cpu1 = map(int, window[3:7])
    inside = [(t, n) for t, n in points(jdk, workload) if start <= t <= end]
    if len(inside) < 2:
        return float("nan"), float("nan")
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    ops = n1 - n0
    # Scale the CPU time to the reported span of the window.
    cpu_seconds = (cpu1 - cpu0) / hz * (t1 - t0) / max(1, end - start)
    return ops * 1000.0 / (t1 - t0), ops / cpu_seconds if cpu_seconds else float("nan")

def recorded(path):
    """What the profile recorded per second: (events, weight) — for alloc the estimated objects
    and bytes allocated, for lock the waits of at least the threshold and their nanoseconds."""
    text = open(path).read()
    if "-asprof" in path or not re.search(r"^Duration\s*:", text, re.M):
        return float("nan"), float("nan")  # async-profiler's window (its own report) or no report
    duration = float(re.search(r"^Duration\s*:\s*([\d.]+)", text, re.M).group(1))
    samples = int(re.search(r"^Total samples\s*:\s*(\d+)", text, re.M).group(1))
    objects = re.search(r"^Estimated (?:objects|allocations)\s*:\s*(\d+)", text, re.M)
    samples = int(objects.group(1)) if objects else samples
    # "Total bytes" (alloc) or "Total nanoseconds"-style lines: the first total but samples.
    weight = int(re.search(r"^Total (?!samples)[^:]*:\s*(\d+)", text, re.M).group(1))
    return samples / duration, weight / duration

results = {}  # (jdk, workload, label) -> list of (ops, base ops, eff, base eff, samples/s)
for i, window in enumerate(windows):
    if window[2] == "base":
        continue
    (b1, e1), (b2, e2) = rates(windows[i - 1]), rates(windows[i + 1])
    ops, eff = rates(window)
    jit = [w[8] for w in (windows[i - 1], window, windows[i + 1])]
    # Relative loss of the JIT-code share against the mean of the neighbouring base windows.
    jit_loss = 100 * (1 - float(jit[1]) / ((float(jit[0]) + float(jit[2])) / 2)) if "-" not in jit else float("nan")
    results.setdefault(tuple(window[:3]), []).append((ops, (b1 + b2) / 2, eff, (e1 + e2) / 2, *recorded(window[7]), cpu_per_second(window), jit_loss))

med = statistics.median

def r_samples(rows, label):
    """Median samples per second of alloc windows: bytes per second / interval."""
    return med(r[5] for r in rows) / interval_bytes(label)
print()
print("| JDK | workload | engine, setting | ops/s with | ops/s without | ops/CPU-s with | ops/CPU-s without | overhead (median) | overhead (min..max) | CPU taken from JIT code (perf, median) | recorded per second |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (jdk, workload, label), rows in results.items():
    overheads = [100 * (1 - eff / base) for _, _, eff, base, *_ in rows]
    if workload.startswith("LockThroughput"):
        per_second = f"{med(r[4] for r in rows):,.0f} waits, {med(r[5] for r in rows) / 1e6:,.0f} ms waited"
    elif label.startswith("asprof"):
        per_second = "(async-profiler)"
    elif label.startswith("leaks"):
        per_second = "(leak window: sampled objects aged in collections)"
    elif label.startswith("live") or label.startswith("nativemem-live"):
        # The profile holds what is still alive at its end: a few windows' worth of garbage at most.
        per_second = "(live objects only)"
    else:
        # One sample per interval bytes on average: the sample rate is the byte rate / interval.
        per_second = f"{med(r[5] for r in rows) / 2**20:,.0f} MiB (est.) in {med(r[4] for r in rows) / 1e6:,.1f} M objects"
        # The overhead's CPU time per sample taken: what the rate of samples scales by.
        # From the perf share when there is one (steadier), else from the throughput loss.
        costs = [(r[7] / 100 if r[7] == r[7] else 1 - r[2] / r[3]) * r[6] / (r[5] / interval_bytes(label)) * 1e6 for r in rows]
        per_second += f"; {r_samples(rows, label):,.0f} samples, ~{med(costs):.1f} µs CPU each"
    print(f"| {jdk} | {workload} | {label} | {med(r[0] for r in rows):,.0f} | {med(r[1] for r in rows):,.0f} | "
          f"{med(r[2] for r in rows):,.0f} | {med(r[3] for r in rows):,.0f} | {med(overheads):.2f}% | "
          f"{min(overheads):.2f}..{max(overheads):.2f}% | {med(r[7] for r in rows):.2f}% | {per_second} |")
PY
