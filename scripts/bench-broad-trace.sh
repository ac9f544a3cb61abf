#!/usr/bin/env bash
# Broad traces on real programs (issue #17): how much slower H2 and javac run while jtap
# traces a whole package of theirs under a threshold, and how soon they are back to speed
# once the classes are restored. Builds jtap in release mode and, per JDK (17 and 25 where
# installed; JAVAS overrides) and program, in one JVM run:
#   - baseline: the driver's units of work per second (tests/java/real: H2 transactions,
#     javac compilations of the test workloads) over 10 s, after 45 s of warm-up;
#   - during `jtap trace <pid> <package> --threshold 500ms -d 60s`: units per second over
#     seconds 5-20 of the trace (its first seconds instrument the loaded classes, then the JIT
#     compiles the instrumented methods again) and over its last 15 s (the probes' steady
#     cost, once the JIT is done);
#   - after: the seconds from the restore until a 1-s window is back to 90 % of the baseline,
#     and the speed over the 10 s after the restore.
# On JDKs before 23 each program also runs with jtap's agent loaded at start-up: the first
# retransformation of a JVM that has not recorded its compiled code's dependencies on classes
# (JDK 11–22, attached late) discards all compiled code, not only the traced classes' callers.
# Prints one table. Needs Debian's h2 and ecj packages (scripts/setup-system.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
JAVAS=${JAVAS:-"/usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java"}
source scripts/lib.sh
cp=/usr/share/java/h2.jar:/usr/share/java/ecj.jar
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -cp "$cp" -d "$work/classes" \
    tests/java/real/Progress.java tests/java/real/H2Load.java tests/java/real/JavacLoop.java

# Units done at the driver's newest PROGRESS line.
done_now() { awk '/^PROGRESS/ {n = $2} END {print n + 0}' "$1"; }
# Units per second over the next $2 seconds.
rate() {
    local a b
    a=$(done_now "$1"); sleep "$2"; b=$(done_now "$1")
    awk -v a="$a" -v b="$b" -v s="$2" 'BEGIN {printf "%.1f", (b - a) / s}'
}

rows=()
for JAVA in $JAVAS; do
    [ -x "$JAVA" ] || { echo "skipping $JAVA (not installed)"; continue; }
    version=$("$JAVA" -version 2>&1 | head -1 | sed 's/.*version "\([0-9]*\).*/\1/')
    loads=(attached)
    [ "$version" -lt 23 ] && loads+=(start-up)
    for load in "${loads[@]}"; do
        for program in h2 javac; do
            case $program in
                h2) args=(real.H2Load 2); package='/org\.h2\..*/::/.*/' ;;
                javac) args=(real.JavacLoop javac tests/java/workloads 2); package='/com\.sun\.tools\.javac\.comp\..*/::/.*/' ;;
            esac
            log=$work/$program-$version-$load.log
            agent=()
            [ "$load" = start-up ] && agent=("-agentpath:$JTAP_AGENT")
            "$JAVA" "${agent[@]}" -cp "$work/classes:$cp" "${args[@]}" >"$log" 2>"$work/$program.err" & pid=$!; pids+=("$pid")
            until grep -q READY "$log"; do sleep 0.2; done
            sleep 45
            base=$(rate "$log" 10)
            "$JTAP" trace "$pid" "$package" --threshold 500ms -d 60s >/dev/null 2>"$work/trace.err" & jt=$!
            sleep 5
            during=$(rate "$log" 15)
            sleep 25
            late=$(rate "$log" 15)
            wait $jt || true
            methods=$(grep -o 'instrumented ([0-9]* methods)' "$work/trace.err" | grep -o '[0-9]*' || echo "?")
            clock=$(grep -o '(field clock[^,)]*\|(tsc clock\|(coarse clock[^)]*' "$work/trace.err" | head -1 | tr -d '(' || echo "?")
            # Recovery: 1-s windows until one reaches 90 % of the baseline (give up after 60 s).
            recovered="> 60"
            start=$(date +%s%N)
            for _ in $(seq 60); do
                r=$(rate "$log" 1)
                if awk -v r="$r" -v b="$base" 'BEGIN {exit !(r >= 0.9 * b)}'; then
                    recovered=$(awk -v s="$start" -v n="$(date +%s%N)" 'BEGIN {printf "%.0f", (n - s) / 1e9}')
                    break
                fi
            done
            after=$(rate "$log" 10)
            kill "$pid"; wait "$pid" 2>/dev/null || true
            rows+=("$version|$load|$program|$methods|$clock|$base|$during|$late|$recovered|$after")
        done
    done
done

echo
echo "Broad traces on real programs (units of work per second; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| JDK | jtap's agent | program | methods traced | clock | baseline | trace, 5-20 s | slowdown | trace, 45-60 s | slowdown | back to 90 % after | speed after |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    IFS='|' read -r v load program methods clock base during late recovered after <<<"$row"
    ratio() { awk -v b="$base" -v d="$1" 'BEGIN {printf "%.2f×", (d > 0 ? b / d : 0)}'; }
    echo "| $v | $load | $program | $methods | $clock | $base/s | $during/s | $(ratio "$during") | $late/s | $(ratio "$late") | ${recovered} s | $after/s |"
done
