#!/usr/bin/env bash
# CPU profiling overhead beside async-profiler (issues #16 and #17), on a flat workload and a
# deep-stack one. Builds jtap in release mode and, per JDK (17 and 25 where installed; JAVAS
# overrides) and workload, in one JVM run alternates unprofiled windows with profiled ones:
# jtap's cpu engine at 10 ms and 1 ms with native frames by DWARF unwinding (its default), by
# frame pointers (`--cstack fp`), and with Java frames by AsyncGetCallTrace instead of jtap's
# walker (`--walker asgct`), then async-profiler 4.x (bin/asprof under ASPROF's
# directory; skipped, saying so, when ASPROF is unset) with its default stack walking (its own
# VM-structure walker, `--cstack vm`) and with `--cstack dwarf`. Workloads:
#   - throughput: tests/java/workloads/Throughput.java, two threads hashing arrays (shallow
#     stacks);
#   - deep: the same, each operation 100 frames down (a steady deep-stack workload: the JIT
#     is done with it in seconds, unlike javac's);
#   - javac: tests/java/real/JavacLoop.java, the JDK's javac compiling the test workloads on
#     two threads (stacks 50-150 frames deep).
# Each profiled window is compared with the mean of the unprofiled windows around it, in units
# of work per CPU second of the whole JVM (agent threads and signal handlers included). Prints
# one Markdown table: the median overhead of each setting over ROUNDS rounds (default 2) of
# BENCH_WINDOW seconds (default 6). Environment: JAVAS, ASPROF, ROUNDS, BENCH_WINDOW,
# WORKLOADS (default "throughput deep javac").
set -euo pipefail
cd "$(dirname "$0")/.."
JAVAS=${JAVAS:-"/usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java"}
WINDOW=${BENCH_WINDOW:-6}
ROUNDS=${ROUNDS:-2}
WORKLOADS=${WORKLOADS:-"throughput deep javac"}
source scripts/lib.sh
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" \
    tests/java/workloads/Throughput.java tests/java/workloads/OpsReport.java \
    tests/java/real/Progress.java tests/java/real/JavacLoop.java \
    -cp /usr/share/java/ecj.jar

tools=(jtap)
if [[ -n "${ASPROF:-}" ]]; then
    tools+=(asprof)
else
    echo "ASPROF is not set: async-profiler's column is skipped"
fi
declare -A args=(
    [jtap-10ms]="-e cpu -i 10ms"
    [jtap-fp-10ms]="-e cpu -i 10ms --cstack fp"
    [jtap-1ms]="-e cpu -i 1ms"
    [jtap-fp-1ms]="-e cpu -i 1ms --cstack fp"
    [jtap-asgct-10ms]="-e cpu -i 10ms --walker asgct"
    [jtap-asgct-1ms]="-e cpu -i 1ms --walker asgct"
    [asprof-10ms]="-e cpu -i 10ms -o collapsed"
    [asprof-dwarf-10ms]="-e cpu -i 10ms --cstack dwarf -o collapsed"
    [asprof-1ms]="-e cpu -i 1ms -o collapsed"
    [asprof-dwarf-1ms]="-e cpu -i 1ms --cstack dwarf -o collapsed"
)
now_ms() { date +%s%3N; }
# utime + stime of the whole JVM, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }

windows=() # "jdk workload setting start-ms end-ms start-ticks end-ticks"
window() {
    local setting=$1 start cpu
    start=$(now_ms)
    cpu=$(cpu_ticks)
    case $setting in
        base) sleep "$WINDOW" ;;
        # shellcheck disable=SC2086 # the settings are words
        jtap-*) "$JTAP" profile "$pid" ${args[$setting]} -d "${WINDOW}s" --format summary >/dev/null ;;
        # shellcheck disable=SC2086
        asprof-*) "$ASPROF" ${args[$setting]} -d "$WINDOW" "$pid" >/dev/null 2>&1 ;;
    esac
    windows+=("$version $workload $setting $start $(now_ms) $cpu $(cpu_ticks)")
}

logs=()
for JAVA in $JAVAS; do
    [ -x "$JAVA" ] || { echo "skipping $JAVA (not installed)"; continue; }
    version=$("$JAVA" -version 2>&1 | head -1 | sed 's/.*version "\([0-9]*\).*/\1/')
    for workload in $WORKLOADS; do
        case $workload in
            throughput) main=(workloads.Throughput 2) ;;
            deep) main=(workloads.Throughput 2 100) ;;
            javac) main=(real.JavacLoop javac tests/java/workloads 2) ;;
        esac
        # Each line of the driver's output with the time it was read (ms).
        log=$work/$workload-$version.log
        logs+=("$log")
        "$JAVA" -cp "$work/classes:/usr/share/java/ecj.jar" "${main[@]}" \
            > >(perl -MTime::HiRes=time -ne '$| = 1; printf "%d %s", time * 1000, $_' >"$log") 2>/dev/null &
        pid=$!
        until grep -q READY "$log" 2>/dev/null; do sleep 0.2; done
        echo "JDK $version, $workload: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        # Warm-up: javac keeps C2 busy for a minute or more, and the compiler threads' CPU counts.
        case $workload in
            javac) sleep $((WINDOW * 10)) ;;
            *) sleep $((WINDOW * 3)) ;;
        esac
        for tool in "${tools[@]}"; do
            # Loads the agent and warms each setting up, untimed.
            for setting in "${!args[@]}"; do
                [[ $setting == "$tool"-* ]] || continue
                case $tool in
                    # shellcheck disable=SC2086
                    jtap) "$JTAP" profile "$pid" ${args[$setting]} -d 1s --format summary >/dev/null ;;
                    # shellcheck disable=SC2086
                    asprof) "$ASPROF" ${args[$setting]} -d 1 "$pid" >/dev/null 2>&1 ;;
                esac
            done
            window base
            for ((round = 0; round < ROUNDS; round++)); do
                for setting in "${!args[@]}"; do
                    [[ $setting == "$tool"-* ]] || continue
                    window "$setting"
                    window base
                done
            done
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$(getconf CLK_TCK)" "${#logs[@]}" "${logs[@]}" "${windows[@]}" <<'PY'
import re, statistics, sys
hz, n = int(sys.argv[1]), int(sys.argv[2])
logs, windows = sys.argv[3:3 + n], [w.split() for w in sys.argv[3 + n:]]
# (time read, units done) from `T ops t n` (Throughput) and `T PROGRESS n` (JavacLoop) lines.
points = {}
for path in logs:
    name = re.search(r"([a-z]+)-(\d+)\.log$", path)
    key = (name.group(2), name.group(1))
    points[key] = [(int(l.split()[0]), int(l.split()[-1])) for l in open(path)
                   if l.split()[1:2] in (["ops"], ["PROGRESS"])]

sys.path.insert(0, "scripts")
from overhead import efficiency, overheads

overheads = overheads(
    windows,
    lambda w: None if w[2] == "base" else (w[0], w[1], w[2]),
    lambda w: efficiency(points[w[0], w[1]], *map(int, w[3:7]), hz),
)
order = ["throughput", "deep", "javac"]
runs = sorted({(j, wl) for j, wl, _ in overheads}, key=lambda r: (order.index(r[1]), int(r[0])))
med = lambda r, s: statistics.median(overheads[r + (s,)]) if r + (s,) in overheads else float("nan")
print()
print("| interval | setting | " + " | ".join(f"{wl}, JDK {j}" for j, wl in runs) + " |")
print("|---|---|" + "---|" * len(runs))
labels = [("jtap", "jtap, DWARF (default)"), ("jtap-fp", "jtap, --cstack fp"),
          ("jtap-asgct", "jtap, --walker asgct"),
          ("asprof", "async-profiler, default (vm)"), ("asprof-dwarf", "async-profiler, --cstack dwarf")]
for interval in ["10ms", "1ms"]:
    for prefix, label in labels:
        s = f"{prefix}-{interval}"
        if any(r + (s,) in overheads for r in runs):
            print(f"| {interval} | {label} | " + " | ".join(f"{med(r, s):.2f}%" for r in runs) + " |")
PY
