#!/usr/bin/env bash
# Allocation profiling's cost beside async-profiler's (issue #38). Builds jtap in release mode
# and, for each JDK in BENCH_JDKS (default "17 25"), runs tests/java/workloads/AllocThroughput.java
# (2 threads allocating short-lived objects, reporting operations every 100 ms) in one JVM:
# unprofiled windows alternate with `jtap profile -e alloc --alloc-interval ALLOC` windows
# (default 512k), then with the floor (scripts/bench/empty-alloc-agent.c, built with cc: heap
# sampling at the same interval with a callback that does nothing, HotSpot's own cost), then
# with async-profiler's `-e alloc --alloc ALLOC` (bin/asprof at ASPROF; skipped, saying so,
# when unset). async-profiler's rounds come last: it keeps the sampling capability, which one
# JVMTI environment holds at a time, once it has used it.
# Each profiled window is compared with the mean of the unprofiled windows on either side, in
# operations per CPU second of the whole JVM, and (with perf) in the share of the JVM's CPU
# samples in JIT-compiled code, which other load on the machine disturbs less, and how much
# of that the profiler's own code took (its library, and for jtap HotSpot's SafeFetchN, which
# its walker calls; the rest is HotSpot's sampled-allocation path). Prints a Markdown table
# per JDK: median and min..max over ROUNDS rounds (default 5) of BENCH_WINDOW
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
# Percent of the JVM's CPU samples in the profiler's own code: its library, and HotSpot's
# SafeFetchN, through which jtap's walker reads VM structures.
own_share() {
    perf report -i "$1" --sort dso,sym --stdio 2>/dev/null |
        awk '/libjtap_agent|libasyncProfiler|SafeFetchN/ {s += $1} END {print s + 0}'
}

windows=() # "jdk tool start-ms end-ms start-ticks end-ticks jit-share own-share"
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
        floor)
            "$JTAP" jcmd "$pid" JVMTI.agent_load "$work/floor.so" "start:$(bytes "$ALLOC")" >/dev/null
            sleep "$WINDOW"
            "$JTAP" jcmd "$pid" JVMTI.agent_load "$work/floor.so" stop >/dev/null ;;
    esac
    local end ticks
    end=$(now_ms)
    ticks=$(cpu_ticks)
    wait "$perf_pid" || true
    windows+=("$jdk $tool $start $end $cpu $ticks $(jit_share "$file") $(own_share "$file")")
}

# 512k, 1m: in bytes.
bytes() { numfmt --from=iec "${1^^}"; }

# The floor, between jtap and async-profiler: a callback that does nothing.
tools=(jtap floor)
if [[ -n "${ASPROF:-}" ]]; then tools+=(asprof); else echo "ASPROF is not set: async-profiler is skipped"; fi
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, ${ROUNDS} rounds, interval $ALLOC"
for jdk in $JDKS; do
    home=$(java_home "$jdk")
    [[ -n "$home" ]] || { echo "JDK $jdk not found" >&2; continue; }
    echo "JDK $jdk: $("$home/bin/java" -version 2>&1 | head -1)"
    cc -O2 -shared -fPIC -I"$home/include" -I"$home/include/linux" -o "$work/floor.so" \
        scripts/bench/empty-alloc-agent.c
    "$home/bin/java" -Xms512m -Xmx512m -cp "$work/classes" workloads.AllocThroughput 2 0 >"$work/ops-$jdk.log" &
    pid=$!
    until grep -q READY "$work/ops-$jdk.log"; do sleep 0.1; done
    sleep $((WINDOW * 2))
    for tool in "${tools[@]}"; do
        case $tool in # loads the agent, warms the engine up
            jtap) "$JTAP" profile "$pid" -e alloc -d 1s --format summary >/dev/null ;;
            asprof) "$ASPROF" -e alloc -d 1 -o collapsed "$pid" >/dev/null 2>&1 ;;
            floor) ;;
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
    base_jit = (float(a[6]) + float(b[6])) / 2
    jit = 100 * (1 - float(w[6]) / base_jit)
    # The profiler's own code, in the same unit: the share of JIT code's CPU it took.
    own = 100 * float(w[7]) / base_jit
    rows.setdefault((w[0], w[1]), []).append((ops, jit, own))
med = statistics.median
print()
print("| JDK | profiler | overhead, ops per CPU-s (median; min..max) | CPU taken from JIT code, perf (median; min..max) | of which the profiler's own code (median) | rounds |")
print("|---|---|---|---|---|---|")
for (jdk, tool), r in rows.items():
    o, j, c = [x[0] for x in r], [x[1] for x in r], [x[2] for x in r]
    print(f"| {jdk} | {tool} | {med(o):.2f}% ({min(o):.2f}..{max(o):.2f}) | {med(j):.2f}% ({min(j):.2f}..{max(j):.2f}) | {med(c):.2f}% | {len(r)} |")
for jdk in sorted({k[0] for k in rows}):
    if (jdk, "jtap") in rows and (jdk, "asprof") in rows:
        ratio = [med(x[k] for x in rows[jdk, "jtap"]) / med(x[k] for x in rows[jdk, "asprof"]) for k in (0, 1)]
        print(f"| {jdk} | jtap / async-profiler | {ratio[0]:.2f}× | {ratio[1]:.2f}× | | |")
PY
