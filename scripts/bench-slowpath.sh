#!/usr/bin/env bash
# How long `calltree --auto` takes to find the slow path on the real programs (issue #36:
# within a minute), with the release build: H2's statement execution, Jetty's request
# handling and javac's compilation, on each JDK of BENCH_JDKS, each program warmed up for
# WARM seconds first (javac's first compilations are slow, and the JIT still compiles).
# Prints one row per search: its time, rounds, levels, and where and why the path ends.
#
#   scripts/bench-slowpath.sh                  # JDK 17 and 25, 30 s of warm-up
#   BENCH_JDKS=25 PROGRAMS=javac scripts/bench-slowpath.sh
set -euo pipefail
cd "$(dirname "$0")/.."
JDKS=${BENCH_JDKS:-17 25}
PROGRAMS=${PROGRAMS:-h2 jetty javac}
WARM=${WARM:-30}
BUDGET=${BUDGET:-60s}
source scripts/lib.sh

jars=/usr/share/java
cp=$jars/h2.jar:$jars/ecj.jar:$jars/jetty9-server.jar:$jars/jetty9-http.jar:$jars/jetty9-io.jar:$jars/jetty9-util.jar:$jars/servlet-api.jar
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -nowarn -cp "$cp" -d "$work/classes" \
    tests/java/real/Progress.java tests/java/real/H2Load.java tests/java/real/JettyLoad.java \
    tests/java/real/JavacLoop.java

rows=()
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); warm-up ${WARM} s, -d $BUDGET"
for jdk in $JDKS; do
    home=$(java_home "$jdk")
    [[ -n "$home" ]] || { echo "JDK $jdk not found" >&2; continue; }
    for program in $PROGRAMS; do
        case $program in
            h2) args=(real.H2Load 2); entry='org.h2.jdbc.JdbcPreparedStatement::executeQuery' ;;
            jetty) args=(real.JettyLoad 2); entry='org.eclipse.jetty.server.Server::handle' ;;
            javac) args=(real.JavacLoop javac tests/java/workloads 2); entry='com.sun.tools.javac.main.JavaCompiler::compile' ;;
            *) echo "unknown program $program" >&2; exit 2 ;;
        esac
        log=$work/$program-$jdk.log
        "$home/bin/java" -Xmx256m -cp "$work/classes:$cp" "${args[@]}" >"$log" 2>&1 &
        pid=$!
        until grep -q READY "$log"; do sleep 0.2; done
        sleep "$WARM"
        start=$(now_ms)
        "$JTAP" calltree "$pid" "$entry" --auto --json -d "$BUDGET" >"$work/out.json" 2>"$work/err.log" || true
        took=$(( $(now_ms) - start ))
        rounds=$(grep -c "^jtap: tracing:" "$work/err.log" || true)
        rows+=("$(python3 - "$work/out.json" "$jdk" "$program" "$took" "$rounds" <<'PY'
import json, sys
path, jdk, program, took, rounds = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if l.startswith("{")]
end = next((l for l in lines if "end" in l), {})
at = end.get("at") or "-"
text = end.get("end", "no path")
# The reason after the path's end: its own code, the time spreading, or the call not instrumented.
why = ("its own code" if "own code" in text else
       "time spreads below it" if "spreads" in text else
       text.split(": ", 1)[1].split(";")[0] if ": " in text else text)
print(f"| {jdk} | {program} | {int(took) / 1000:.1f} s | {rounds} | {end.get('levels', 0)} | `{at}` | {why} |")
PY
)")
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        pid=
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| JDK | program | search took | rounds | levels | ends at | why |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
