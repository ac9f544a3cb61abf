#!/usr/bin/env bash
# Allocation profiling's cost beside async-profiler's (issue #38). Builds jtap in release mode
# and, for each JDK in BENCH_JDKS (default "17 25"), runs tests/java/workloads/AllocThroughput.java
# (2 threads allocating short-lived objects, reporting operations every 100 ms) in one JVM:
# unprofiled windows alternate with `jtap profile -e alloc --alloc-interval ALLOC` windows
# (default 512k), then with async-profiler's `-e alloc --alloc ALLOC` (bin/asprof at ASPROF;
# skipped, saying so, when unset). jtap's rounds come first: async-profiler keeps the
# sampling capability, which one JVMTI environment holds at a time, once it has used it.
# Each profiled window is compared with the mean of the unprofiled windows on either side, in
# operations per CPU second of the whole JVM, and (with perf) in the share of the JVM's CPU
# samples in JIT-compiled code, which other load on the machine disturbs less. Prints a
# Markdown table per JDK: median and min..max over ROUNDS rounds (default 5) of BENCH_WINDOW
# seconds (default 5), and jtap's median over async-profiler's.
set -euo pipefail
cd "$(dirname "$0")/.."
JDKS=${BENCH_JDKS:-17 25}
WINDOW=${BENCH_WINDOW:-5}
ROUNDS=${ROUNDS:-5}
ALLOC=${ALLOC:-512k}
source scripts/lib.sh
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" \
    tests/java/workloads/AllocThroughput.java tests/java/workloads/OpsReport.java

cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }
# Percent of the JVM's CPU samples in JIT-compiled code.
jit_share() { perf report -i "$1" --sort dso --stdio 2>/dev/null | awk '/\[JIT\]/ {s += $1} END {print s + 0}'; }

windows=() # "jdk tool start-ms end-ms start-ticks end-ticks jit-share"
window() {
    local jdk=$1 tool=$2 start cpu file=$work/w${#windows[@]}.perf
    start=$(now_ms)
    cpu=$(cpu_ticks)
    perf record -q -F 499 -p "$pid" -o "$file" -- sleep "$WINDOW" >/dev/null 2>&1 &
    local perf_pid=$!
    case $tool in
        base) sleep "$WINDOW" ;;
        jtap) "$JTAP" profile "$pid" -e alloc --alloc-interval "$ALLOC" -d "${WINDOW}s" --format summary >/dev/null ;;
        asprof) "$ASPROF" -e alloc --alloc "$ALLOC" -d "$WINDOW" -o collapsed "$pid" >/dev/null 2>&1 ;;
    esac
    local end ticks
    end=$(now_ms)
    ticks=$(cpu_ticks)
    wait "$perf_pid" || true
    windows+=("$jdk $tool $start $end $cpu $ticks $(jit_share "$file")")
}

tools=(jtap)
if [[ -n "${ASPROF:-}" ]]; then tools+=(asprof); else echo "ASPROF is not set: async-profiler is skipped"; fi
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, ${ROUNDS} rounds, interval $ALLOC"
for jdk in $JDKS; do
    home=$(java_home "$jdk")
    [[ -n "$home" ]] || { echo "JDK $jdk not found" >&2; continue; }
    echo "JDK $jdk: $("$home/bin/java" -version 2>&1 | head -1)"
    "$home/bin/java" -Xms512m -Xmx512m -cp "$work/classes" workloads.AllocThroughput 2 0 >"$work/ops-$jdk.log" &
    pid=$!
    until grep -q READY "$work/ops-$jdk.log"; do sleep 0.1; done
    sleep $((WINDOW * 2))
    for tool in "${tools[@]}"; do
        case $tool in # loads the agent, warms the engine up
            jtap) "$JTAP" profile "$pid" -e alloc -d 1s --format summary >/dev/null ;;
            asprof) "$ASPROF" -e alloc -d 1 -o collapsed "$pid" >/dev/null 2>&1 ;;
        esac
        window "$jdk" base
        for ((round = 0; round < ROUNDS; round++)); do
            window "$jdk" "$tool"
            window "$jdk" base
        done
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work" "$(getconf CLK_TCK)" "${windows[@]}" <<'PY'
import statistics, sys
sys.path.insert(0, "scripts")
from overhead import efficiency
work, hz, windows = sys.argv[1], int(sys.argv[2]), [w.split() for w in sys.argv[3:]]
points = {}
def eff(w):
    jdk = w[0]
    if jdk not in points:
        points[jdk] = [tuple(map(int, l.split()[1:])) for l in open(f"{work}/ops-{jdk}.log") if l.startswith("ops ")]
    return efficiency(points[jdk], *map(int, w[2:6]), hz)
rows = {}
for i, w in enumerate(windows):
    if w[1] == "base":
        continue
    a, b = windows[i - 1], windows[i + 1]
    ops = 100 * (1 - eff(w) / ((eff(a) + eff(b)) / 2))
    jit = 100 * (1 - float(w[6]) / ((float(a[6]) + float(b[6])) / 2))
    rows.setdefault((w[0], w[1]), []).append((ops, jit))
med = statistics.median
print()
print("| JDK | profiler | overhead, ops per CPU-s (median; min..max) | CPU taken from JIT code, perf (median; min..max) | rounds |")
print("|---|---|---|---|---|")
for (jdk, tool), r in rows.items():
    o, j = [x[0] for x in r], [x[1] for x in r]
    print(f"| {jdk} | {tool} | {med(o):.2f}% ({min(o):.2f}..{max(o):.2f}) | {med(j):.2f}% ({min(j):.2f}..{max(j):.2f}) | {len(r)} |")
for jdk in sorted({k[0] for k in rows}):
    if (jdk, "jtap") in rows and (jdk, "asprof") in rows:
        ratio = [med(x[k] for x in rows[jdk, "jtap"]) / med(x[k] for x in rows[jdk, "asprof"]) for k in (0, 1)]
        print(f"| {jdk} | jtap / async-profiler | {ratio[0]:.2f}× | {ratio[1]:.2f}× | |")
PY
