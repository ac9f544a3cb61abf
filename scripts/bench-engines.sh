#!/usr/bin/env bash
# Several engines at once against each alone, beside async-profiler doing the same (issue #13).
# Builds jtap in release mode and runs tests/java/workloads/AllocThroughput.java (2 threads
# allocating short-lived objects, reporting operations every 100 ms). In one JVM run it
# alternates unprofiled windows with profiled ones: cpu at INTERVAL (default 10ms), alloc at
# ALLOC (512k), lock at LOCK (10us), and the three together, first with jtap, then with
# async-profiler (bin/asprof under ASPROF's directory; skipped, saying so, when ASPROF is
# unset; several events at once need its JFR output). Each profiled window is compared with
# the mean of the unprofiled windows around it, in operations per CPU second of the whole
# JVM. Prints a Markdown table: the median overhead of each setting over ROUNDS rounds
# (default 3) of BENCH_WINDOW seconds (default 5), and the sum of the three alone beside the
# three together. Environment: JAVA (default JDK 17), ASPROF, INTERVAL, ALLOC, LOCK, ROUNDS,
# BENCH_WINDOW.
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA=${JAVA:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}
WINDOW=${BENCH_WINDOW:-5}
ROUNDS=${ROUNDS:-3}
INTERVAL=${INTERVAL:-10ms}
ALLOC=${ALLOC:-512k}
LOCK=${LOCK:-10us}
source scripts/lib.sh
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" \
    tests/java/workloads/AllocThroughput.java tests/java/workloads/OpsReport.java
"$JAVA" -Xms512m -Xmx512m -cp "$work/classes" workloads.AllocThroughput 2 0 >"$work/ops.log" &
pid=$!
until grep -q READY "$work/ops.log"; do sleep 0.1; done

now_ms() { date +%s%3N; }
# utime + stime of the whole JVM, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }

declare -A jtap_args=(
    [cpu]="-e cpu -i $INTERVAL"
    [alloc]="-e alloc --alloc $ALLOC"
    [lock]="-e lock --lock $LOCK"
    [together]="-e cpu,alloc,lock -i $INTERVAL --alloc $ALLOC --lock $LOCK"
)
declare -A asprof_args=(
    [cpu]="-e cpu -i $INTERVAL -o collapsed"
    [alloc]="-e alloc --alloc $ALLOC -o collapsed"
    [lock]="-e lock --lock $LOCK -o collapsed"
    [together]="-e cpu -i $INTERVAL --alloc $ALLOC --lock $LOCK -f $work/together.jfr"
)
settings=(cpu alloc lock together)

windows=() # "tool setting start-ms end-ms start-ticks end-ticks"
window() {
    local tool=$1 setting=$2 start cpu
    start=$(now_ms)
    cpu=$(cpu_ticks)
    case $tool in
        base) sleep "$WINDOW" ;;
        # shellcheck disable=SC2086 # the settings are words
        jtap) "$JTAP" profile "$pid" ${jtap_args[$setting]} -d "${WINDOW}s" --format summary >/dev/null ;;
        # shellcheck disable=SC2086
        asprof) "$ASPROF" ${asprof_args[$setting]} -d "$WINDOW" "$pid" >/dev/null 2>&1 ;;
    esac
    windows+=("$tool $setting $start $(now_ms) $cpu $(cpu_ticks)")
}

tools=(jtap)
if [[ -n "${ASPROF:-}" ]]; then
    tools+=(asprof)
else
    echo "ASPROF is not set: async-profiler's column is skipped"
fi
echo "JVM: $("$JAVA" -version 2>&1 | head -1); cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, ${ROUNDS} rounds"
sleep $((WINDOW * 2)) # warm-up
# Each tool's rounds run together: async-profiler keeps the allocation-sampling capability,
# which one JVMTI environment at a time can hold, once it has used it.
for tool in "${tools[@]}"; do
    for setting in "${settings[@]}"; do # loads the agent and warms each engine up
        case $tool in
            # shellcheck disable=SC2086
            jtap) "$JTAP" profile "$pid" ${jtap_args[$setting]} -d 1s --format summary >/dev/null ;;
            # shellcheck disable=SC2086
            asprof) "$ASPROF" ${asprof_args[$setting]} -d 1 "$pid" >/dev/null 2>&1 ;;
        esac
    done
    window base -
    for ((round = 0; round < ROUNDS; round++)); do
        for setting in "${settings[@]}"; do
            window "$tool" "$setting"
            window base -
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work/ops.log" "$(getconf CLK_TCK)" "${windows[@]}" <<'PY'
import statistics, sys
log, hz, windows = sys.argv[1], int(sys.argv[2]), [w.split() for w in sys.argv[3:]]
points = [tuple(map(int, l.split()[1:])) for l in open(log) if l.startswith("ops ")]

sys.path.insert(0, "scripts")
from overhead import efficiency, overheads

overheads = overheads(
    windows,
    lambda w: None if w[0] == "base" else (w[0], w[1]),
    lambda w: efficiency(points, *map(int, w[2:6]), hz),
)
tools = sorted({t for t, _ in overheads}, key=lambda t: t != "jtap")
med = lambda t, s: statistics.median(overheads[t, s]) if (t, s) in overheads else float("nan")
print()
print("| setting | " + " | ".join(f"{t} overhead" for t in tools) + " |")
print("|---|" + "---|" * len(tools))
for s in ["cpu", "alloc", "lock"]:
    print(f"| {s} alone | " + " | ".join(f"{med(t, s):.2f}%" for t in tools) + " |")
print("| sum of the three alone | " + " | ".join(f"{sum(med(t, s) for s in ['cpu', 'alloc', 'lock']):.2f}%" for t in tools) + " |")
print("| cpu+alloc+lock together | " + " | ".join(f"{med(t, 'together'):.2f}%" for t in tools) + " |")
PY
