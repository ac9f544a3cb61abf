#!/usr/bin/env bash
# Method-tracing benchmark. Builds jtap and its agent in release mode and, per JDK (17 and
# 25 where installed; JAVAS overrides), measures on tests/java/workloads/TraceBench.java:
#   - the cost per call of a traced tiny method whose calls all fall under --threshold
#     (nothing printed): ns per loop iteration while traced minus before (median of windows
#     of 20 M calls), with --threshold 1s (probes read the kernel's coarse clock) and with
#     --threshold 10ms (probes read the TSC); System.nanoTime()'s cost is shown for scale;
#   - the same once the trace stopped and the classes were restored (back to the JIT's
#     original speed?);
#   - the cost per call when every call is reported (records the printing thread cannot
#     keep up with are dropped and counted; the table says how many got through);
#   - the time to instrument and to restore 1,000 loaded classes (from Guava's jar:
#     `jtap trace <pid> 'com.google.common.*'`, every method of every class);
#   - BTrace scripts on the tiny method (`jtap btrace`): the issue's Tracker shape (a
#     10 ms @Duration guard, which becomes the agent's threshold) and a guard on an argument
#     that is never true (evaluated in the client, so every call is captured and sent).
# Prints one table next to async-profiler 4.x's figures quoted in issue #7.
set -euo pipefail
cd "$(dirname "$0")/.."
JAVAS=${JAVAS:-"/usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java"}
JAR=${BENCH_JAR:-/usr/share/java/guava.jar}
cargo build --release --quiet -p jtap-agent -p jtap-cli
JTAP=$PWD/target/release/jtap
export JTAP_AGENT=$PWD/target/release/libjtap_agent.so
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" tests/java/workloads/TraceBench.java

# Median of the NS values on lines FROM..TO (1-based) of a log.
median_ns() { sed -n "$2,$3p" "$1" | awk '/^NS/ {print $2}' | sort -g | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "nan")}'; }
lines() { wc -l <"$1"; }
# Waits until the log has N more lines than it had.
wait_lines() { local target=$(( $(lines "$1") + $2 )); until [ "$(lines "$1")" -ge "$target" ]; do sleep 0.05; done; }

rows=()
for JAVA in $JAVAS; do
    [ -x "$JAVA" ] || { echo "skipping $JAVA (not installed)"; continue; }
    version=$("$JAVA" -version 2>&1 | head -1 | sed 's/.*version "\([0-9]*\).*/\1/')
    log=$work/ns-$version.log
    "$JAVA" -cp "$work/classes" workloads.TraceBench calls >"$log" & pid=$!; pids+=("$pid")
    until grep -q READY "$log"; do sleep 0.1; done
    wait_lines "$log" 40                                     # warm-up
    start=$(lines "$log"); wait_lines "$log" 20
    base=$(median_ns "$log" "$start" "$(lines "$log")")

    nanotime=$(awk '/^NANOTIME/ {printf "%.1f", $2}' "$log")
    # Under the threshold: nothing printed.
    quiet_run() {
        "$JTAP" trace "$pid" workloads.TraceBench::tiny --threshold "$1" -d 600s >"$work/quiet.out" 2>"$work/quiet.err" & jt=$!
        until grep -q "jtap: tracing" "$work/quiet.err"; do sleep 0.05; done
        wait_lines "$log" 2; start=$(lines "$log"); wait_lines "$log" 6
        median_ns "$log" "$start" "$(lines "$log")"
        kill -INT $jt; wait $jt || true
    }
    quiet=$(quiet_run 1s)
    wait_lines "$log" 10
    quiet_tsc=$(quiet_run 10ms)

    # BTrace scripts: a duration guard, and a guard on the argument that never holds.
    btrace_run() {
        "$JTAP" btrace "$pid" "$1" -d 600s >"$work/btrace.out" 2>"$work/btrace.err" & jt=$!
        until grep -q "jtap: tracing" "$work/btrace.err"; do sleep 0.05; done
        wait_lines "$log" 2; start=$(lines "$log"); wait_lines "$log" 6
        median_ns "$log" "$start" "$(lines "$log")"
        kill -INT $jt; wait $jt || true
    }
    for guard in duration arg; do
        case $guard in
            duration) params='@Duration long d'; condition='d > 10000000l' ;;
            arg) params='int x'; condition='x == -1' ;;
        esac
        cat >"$work/Guard$guard.java" <<EOF
import com.sun.btrace.annotations.*;
import static com.sun.btrace.BTraceUtils.*;
@BTrace public class Guard$guard {
    @OnMethod(clazz = "workloads.TraceBench", method = "tiny", location = @Location(Kind.RETURN))
    public static void h($params) { if ($condition) { println("slow"); } }
}
EOF
    done
    wait_lines "$log" 10
    btrace_duration=$(btrace_run "$work/Guardduration.java")
    wait_lines "$log" 10
    btrace_arg=$(btrace_run "$work/Guardarg.java")

    # After restoring: the method's original speed.
    wait_lines "$log" 20; start=$(lines "$log"); wait_lines "$log" 20
    after=$(median_ns "$log" "$start" "$(lines "$log")")

    # Every call reported.
    "$JTAP" trace "$pid" workloads.TraceBench::tiny -d 600s >"$work/all.out" 2>"$work/all.err" & jt=$!
    until grep -q "jtap: tracing" "$work/all.err"; do sleep 0.05; done
    wait_lines "$log" 1; start=$(lines "$log"); wait_lines "$log" 3
    all=$(median_ns "$log" "$start" "$(lines "$log")")
    kill -INT $jt; wait $jt || true
    printed=$(grep -c 'TraceBench.tiny' "$work/all.out" || true)
    dropped=$(grep -o '[0-9]* dropped' "$work/all.err" | grep -o '[0-9]*' || echo "?")
    kill "$pid"

    # 1,000 loaded classes.
    clog=$work/classes-$version.log
    "$JAVA" -cp "$work/classes" workloads.TraceBench classes "$JAR" 1000 >"$clog" & cpid=$!; pids+=("$cpid")
    until grep -q READY "$clog"; do sleep 0.1; done
    "$JTAP" trace "$cpid" 'com.google.common.*' --threshold 1s -d 1s >/dev/null 2>"$work/classes.err" || true
    instrumented=$(grep -o 'tracing: [0-9]* loaded classes instrumented ([0-9]* methods) in [0-9]* ms' "$work/classes.err" || echo "?")
    restored=$(grep -o 'restored [0-9]* classes in [0-9]* ms' "$work/classes.err" || echo "?")
    check=$(grep -o 'class bytes identical to before for [0-9/]*, method bytecode sizes identical for [0-9/]*' "$work/classes.err" || echo "?")
    kill "$cpid"

    per_call() { awk -v a="$1" -v b="$base" 'BEGIN {printf "%.1f", a - b}'; }
    rows+=("$version|$base|$(per_call "$quiet")|$(per_call "$quiet_tsc")|$(per_call "$after")|$(per_call "$all")|$printed printed, $dropped dropped|$nanotime|$instrumented|$restored|$check|$(per_call "$btrace_duration")|$(per_call "$btrace_arg")")
done

echo
echo "Method tracing cost (ns per call of a tiny method; 20 M-call windows, medians; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
printf '| %-4s | %-10s | %-14s | %-20s | %-21s | %-14s | %-20s | %-34s |\n' JDK "untraced" "nanoTime()" "--threshold 1s" "--threshold 10ms" "after restore" "every call reported" "records"
printf '|------|------------|----------------|----------------------|-----------------------|----------------|----------------------|------------------------------------|\n'
for row in "${rows[@]}"; do
    IFS='|' read -r v base quiet quiet_tsc after all records nanotime _ <<<"$row"
    printf '| %-4s | %-10s | %-14s | %-20s | %-21s | %-14s | %-20s | %-34s |\n' "$v" "$(printf %.2f "$base") ns" "${nanotime} ns" "+${quiet} ns (coarse)" "+${quiet_tsc} ns (TSC)" "+${after} ns" "+${all} ns" "$records"
done
echo
echo "BTrace scripts on the same method (ns per call, beside --threshold 10ms above):"
echo
echo "| JDK | if (duration > 10ms): the agent's threshold | if (x == -1): evaluated in the client |"
echo "|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r v _ _ _ _ _ _ _ _ _ _ btrace_duration btrace_arg <<<"$row"
    echo "| $v | +$btrace_duration ns | +$btrace_arg ns |"
done
echo
echo "Instrumenting and restoring 1,000 loaded classes (every method of 1,000 Guava classes):"
for row in "${rows[@]}"; do
    IFS="|" read -r v _ _ _ _ _ _ _ instrumented restored check _ _ <<<"$row"
    echo "  JDK $v: $instrumented; $restored; $check"
done
echo
echo "async-profiler 4.x (issue #7, tiny method, JDK 17 and 25): ~50 ns per call under the threshold,"
echo "~750 ns per call recording every call, ~575 ns per call counting with stacks, 100-200 ms to apply."
