#!/usr/bin/env bash
# Method-tracing benchmark. Builds jtap and its agent in release mode and, per JDK (17 and
# 25 where installed; JAVAS overrides), measures on tests/java/workloads/TraceBench.java:
#   - the cost per call of a traced tiny method whose calls all fall under --threshold
#     (nothing printed): ns per loop iteration while traced minus before (median of windows
#     of at least 200 ms), with --threshold 1ms, 10ms and 1s (the probes compare a clock field the
#     jtap-clock thread advances); System.nanoTime()'s cost is shown for scale;
#   - the same once the trace stopped and the classes were restored (back to the JIT's
#     original speed?);
#   - the cost per call when every call is reported (records the printing thread cannot
#     keep up with are dropped and counted; the table says how many got through);
#   - the time to instrument and to restore 1,000 loaded classes (from Guava's jar:
#     `jtap trace <pid> 'com.google.common.*'`, every method of every class);
#   - BTrace scripts on the tiny method (`jtap btrace`): the issue's Tracker shape (a
#     10 ms @Duration guard, which becomes the agent's threshold) and a guard on an argument
#     that is never true (compiled into the traced method: no call is captured).
#   - the CPU the field clock's `jtap-clock` thread takes (thresholds of 1 ms and more);
#   - with ASPROF set (../shared/anchors/async-profiler/bin/asprof), async-profiler's method
#     tracing of the same method in the same JVM run, after jtap's windows: `--trace
#     workloads.TraceBench.tiny:10ms`, `:1s` and every call.
# Prints the tables, async-profiler's beside jtap's.
set -euo pipefail
cd "$(dirname "$0")/.."
JAVAS=${JAVAS:-"/usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java"}
JAR=${BENCH_JAR:-/usr/share/java/guava.jar}
source scripts/lib.sh
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
    # On-CPU nanoseconds of the JVM's jtap-clock thread so far (0 when there is none).
    clock_cpu() {
        local task
        for task in /proc/"$pid"/task/*; do
            if [ "$(cat "$task/comm" 2>/dev/null)" = jtap-clock ]; then
                cut -d' ' -f1 "$task/schedstat"; return
            fi
        done
        echo 0
    }
    # Prints "median-ns clock-thread-percent-of-a-core".
    quiet_run() {
        "$JTAP" trace "$pid" workloads.TraceBench::tiny --threshold "$1" -d 600s >"$work/quiet.out" 2>"$work/quiet.err" & jt=$!
        until grep -q "jtap: tracing" "$work/quiet.err"; do sleep 0.05; done
        wait_lines "$log" 2; start=$(lines "$log")
        local cpu0 t0 cpu1 t1
        cpu0=$(clock_cpu); t0=$(date +%s%N)
        wait_lines "$log" 6
        cpu1=$(clock_cpu); t1=$(date +%s%N)
        echo "$(median_ns "$log" "$start" "$(lines "$log")") $(awk -v c=$((cpu1 - cpu0)) -v t=$((t1 - t0)) 'BEGIN {printf "%.2f", 100 * c / t}')"
        kill -INT $jt; wait $jt || true
    }
    read -r quiet quiet_clock <<<"$(quiet_run 1s)"
    wait_lines "$log" 10
    read -r quiet_tsc tsc_clock <<<"$(quiet_run 10ms)"
    wait_lines "$log" 10
    read -r quiet_1ms ms_clock <<<"$(quiet_run 1ms)"

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

    # async-profiler's method tracing, last (its instrumentation may outlive its stop).
    ap_run() {
        "$ASPROF" start --trace "workloads.TraceBench.tiny$1" "$pid" >/dev/null
        wait_lines "$log" 2; start=$(lines "$log"); wait_lines "$log" "$2"
        median_ns "$log" "$start" "$(lines "$log")"
        "$ASPROF" stop "$pid" >/dev/null
    }
    ap="nan|nan|nan|nan"
    if [ -n "${ASPROF:-}" ]; then
        wait_lines "$log" 10
        ap_tsc=$(ap_run :10ms 6)
        wait_lines "$log" 6; start=$(lines "$log"); wait_lines "$log" 6
        ap_after=$(median_ns "$log" "$start" "$(lines "$log")")
        ap_1s=$(ap_run :1s 6)
        ap_all=$(ap_run "" 3)
        ap="$ap_tsc|$ap_1s|$ap_all|$ap_after"
    fi
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
    IFS='|' read -r ap_tsc ap_1s ap_all ap_after <<<"$ap"
    rows+=("$version|$base|$(per_call "$quiet")|$(per_call "$quiet_tsc")|$(per_call "$after")|$(per_call "$all")|$printed printed, $dropped dropped|$nanotime|$instrumented|$restored|$check|$(per_call "$btrace_duration")|$(per_call "$btrace_arg")|$(per_call "$quiet_1ms")|$quiet_clock|$tsc_clock|$ms_clock|$(per_call "$ap_tsc")|$(per_call "$ap_1s")|$(per_call "$ap_all")|$(per_call "$ap_after")")
done

echo
echo "Method tracing cost (ns per call of a tiny method; 200-ms windows, medians; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Under a threshold (nothing printed; the field clock, and the CPU its jtap-clock thread takes):"
echo
echo "| JDK | untraced | nanoTime() | --threshold 1ms | --threshold 10ms | --threshold 1s | after restore |"
echo "|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r v base quiet quiet_tsc after _ _ nanotime _ _ _ _ _ quiet_1ms quiet_clock tsc_clock ms_clock _ <<<"$row"
    printf '| %s | %.2f ns | %s ns | +%s ns (clock %s%%) | +%s ns (clock %s%%) | +%s ns (clock %s%%) | +%s ns |\n' \
        "$v" "$base" "$nanotime" "$quiet_1ms" "$ms_clock" "$quiet_tsc" "$tsc_clock" "$quiet" "$quiet_clock" "$after"
done
echo
echo "Beside async-profiler (--trace workloads.TraceBench.tiny[:threshold], same JVM run, after jtap's windows):"
echo
echo "| JDK | what | jtap | async-profiler |"
echo "|---|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r v _ quiet quiet_tsc after all records _ _ _ _ _ _ _ _ _ _ ap_tsc ap_1s ap_all ap_after <<<"$row"
    echo "| $v | under a 10 ms threshold | +$quiet_tsc ns | +$ap_tsc ns |"
    echo "| $v | under a 1 s threshold | +$quiet ns | +$ap_1s ns |"
    echo "| $v | every call recorded | +$all ns ($records) | +$ap_all ns |"
    echo "| $v | after the trace stops | +$after ns | +$ap_after ns |"
done
echo
echo "BTrace scripts on the same method (ns per call, beside --threshold 10ms above):"
echo
echo "| JDK | if (duration > 10ms): the agent's threshold | if (x == -1): tested in the traced method |"
echo "|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r v _ _ _ _ _ _ _ _ _ _ btrace_duration btrace_arg _ <<<"$row"
    echo "| $v | +$btrace_duration ns | +$btrace_arg ns |"
done
echo
echo "Instrumenting and restoring 1,000 loaded classes (every method of 1,000 Guava classes):"
for row in "${rows[@]}"; do
    IFS="|" read -r v _ _ _ _ _ _ _ instrumented restored check _ <<<"$row"
    echo "  JDK $v: $instrumented; $restored; $check"
done
[ -n "${ASPROF:-}" ] || echo "(ASPROF unset: async-profiler's columns are empty; set it to ../shared/anchors/async-profiler/bin/asprof)"
