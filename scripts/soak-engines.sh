#!/usr/bin/env bash
# Engine soak on the real programs (issue #16: "no crash over 10 minutes of each engine at
# 1 ms on each"). Per program and JDK, one JVM runs the program's driver
# (tests/java/real: javac, ECJ, H2 under a JDBC load, Jetty serving HTTP) and is profiled by
# each engine set in turn for DURATION seconds (default 600), every time-based engine at 1 ms:
#   - cpu: `-e cpu,alloc,lock,nativemem -i 1ms --wall 1ms` (perf_events CPU, wall clock,
#     allocations every 64 KiB, contended locks over 1 µs, native memory every 64 KiB);
#   - itimer: `-e itimer -i 1ms`;
#   - ctimer: `-e ctimer -i 1ms`.
# After each phase: the JVM must be alive, the driver must have made progress during it, and
# jtap must have exited 0 with samples. Prints one table row per phase (the driver's units per
# second before and during the phase) and exits non-zero on any failure. Environment:
# DURATION, PROGRAMS (default "javac ecj h2 jetty"), JDKS (versions, default: the test
# matrix's, from target/jdk-matrix.txt or scripts/setup-jdks.sh), PHASES (default
# "cpu itimer ctimer").
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-600}
PROGRAMS=${PROGRAMS:-"javac ecj h2 jetty"}
PHASES=${PHASES:-"cpu itimer ctimer"}
[[ -f /usr/share/java/h2.jar ]] || scripts/setup-system.sh
[[ -f target/jdk-matrix.txt ]] || scripts/setup-jdks.sh
JDKS=${JDKS:-$(cut -d' ' -f1 target/jdk-matrix.txt | tr '\n' ' ')}
source scripts/lib.sh

/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" \
    -cp "/usr/share/java/ecj.jar:/usr/share/java/h2.jar:$(ls /usr/share/java/jetty9-*.jar /usr/share/java/servlet-api.jar | tr '\n' ':')" \
    tests/java/real/*.java
jetty_jars=$(printf '/usr/share/java/%s.jar:' jetty9-server jetty9-http jetty9-io jetty9-util servlet-api)

declare -A engines=(
    [cpu]="-e cpu,alloc,lock,nativemem -i 1ms --wall 1ms --alloc 64k --lock 1us --nativemem 64k"
    [itimer]="-e itimer -i 1ms"
    [ctimer]="-e ctimer -i 1ms"
)

# The driver's last PROGRESS count.
progress() { grep PROGRESS "$log" | tail -1 | awk '{print $2}'; }

rows=()
failed=0
for version in $JDKS; do
    home=$(awk -v v="$version" '$1 == v {print $2}' target/jdk-matrix.txt)
    for program in $PROGRAMS; do
        case $program in
            javac) [[ $version == 17 || $version == 25 ]] || continue
                   main=(real.JavacLoop javac tests/java/workloads 2) ;;
            ecj) main=(real.JavacLoop ecj tests/java/workloads 2) ;;
            h2) main=(real.H2Load 3) ;;
            jetty) main=(real.JettyLoad 2) ;;
        esac
        log=$work/$program-$version.log
        "$home/bin/java" -cp "$work/classes:/usr/share/java/ecj.jar:/usr/share/java/h2.jar:$jetty_jars" \
            "${main[@]}" >"$log" 2>&1 &
        pid=$!
        until grep -q READY "$log" 2>/dev/null; do
            kill -0 "$pid" 2>/dev/null || { echo "$program on JDK $version did not start:"; cat "$log"; exit 1; }
            sleep 0.2
        done
        sleep 20 # warm-up
        for phase in $PHASES; do
            before=$(progress); sleep 10; base=$(( ($(progress) - before) / 10 ))
            start=$(progress)
            # shellcheck disable=SC2086 # the settings are words
            if out=$("$JTAP" profile "$pid" ${engines[$phase]} -d "${DURATION}s" --format summary 2>&1); then
                status=ok
            else
                status="jtap failed"
            fi
            # The summary's "Total samples : N", of the first event.
            samples=$(awk -F': *' '/^Total samples/ {print $2; exit}' <<<"$out")
            during=$(( ($(progress) - start) / DURATION ))
            if ! kill -0 "$pid" 2>/dev/null; then
                status="JVM gone"
            elif [[ $status == ok && ( -z $samples || $samples == 0 ) ]]; then
                status="no samples"
            elif [[ $status == ok && $during -le 0 ]]; then
                status="no progress"
            fi
            [[ $status == ok ]] || { failed=1; echo "$program, JDK $version, $phase: $status" >&2; echo "$out" | tail -5 >&2; }
            rows+=("| $program | $version | $phase | $status | ${samples:-0} | $base/s | $during/s |")
            echo "${rows[-1]}" >&2
            kill -0 "$pid" 2>/dev/null || break
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=
    done
done

echo
echo "| program | JDK | engines | result | samples | units before | units during |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
