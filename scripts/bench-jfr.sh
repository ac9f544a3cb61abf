#!/usr/bin/env bash
# JFR output and conversion beside async-profiler (issue #15). Builds jtap in release mode and
# runs tests/java/workloads/Mixed.java (threads burning CPU in a 1:2:4 ratio, allocating and
# waiting for monitors) on JDK 17. In one JVM run: a cpu profile at INTERVAL (default 1ms) for
# DURATION seconds (default 60) written as JFR by jtap, then the same by async-profiler
# (bin/asprof under ASPROF's directory; skipped, saying so, when ASPROF is unset). Prints the
# samples each recording holds (counted by the JDK's own `jfr summary`), its size, bytes per
# sample, and how long the command took past the profiling duration (stop, transfer,
# rendering, writing). Then the conversion of a recording of about BIG_MB MiB (default 100;
# async-profiler's recording, or jtap's, repeated chunk after chunk) to collapsed stacks:
# `jtap convert -e cpu` beside async-profiler's `jfrconv` (cpu samples by default), RUNS times
# each in turn: the fastest and median times, and MiB per second.
set -euo pipefail
cd "$(dirname "$0")/.."
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
DURATION=${DURATION:-60}
INTERVAL=${INTERVAL:-1ms}
BIG_MB=${BIG_MB:-100}
source scripts/lib.sh
"$JDK/bin/javac" --release 11 -d "$work/classes" tests/java/workloads/Mixed.java \
    tests/java/workloads/Burn.java tests/java/workloads/AllocSites.java
"$JDK/bin/java" -cp "$work/classes" workloads.Mixed >"$work/out.log" 2>&1 &
pid=$!
until grep -q READY "$work/out.log"; do sleep 0.1; done
sleep 2

samples() { "$JDK/bin/jfr" summary "$1" | awk '$1 == "jdk.ExecutionSample" {print $2}'; }
rows=()
record() { # tool file command...
    local tool=$1 file=$2 start end
    shift 2
    start=$(now_ms)
    "$@" >/dev/null 2>&1
    end=$(now_ms)
    local n bytes
    n=$(samples "$file")
    bytes=$(stat -c %s "$file")
    rows+=("| $tool | $n | $bytes | $((bytes / (n > 0 ? n : 1))) | $((end - start - DURATION * 1000)) ms |")
}
record jtap "$work/jtap.jfr" "$JTAP" profile "$pid" -e cpu -i "$INTERVAL" -d "${DURATION}s" -o "$work/jtap.jfr"
big_source=$work/jtap.jfr
if [[ -n "${ASPROF:-}" ]]; then
    record async-profiler "$work/asprof.jfr" "$ASPROF" -e cpu -i "$INTERVAL" -d "$DURATION" -f "$work/asprof.jfr" "$pid"
    big_source=$work/asprof.jfr
else
    echo "ASPROF unset: async-profiler's columns skipped" >&2
fi
kill "$pid"
pid=

echo "JFR of a ${DURATION} s cpu profile at $INTERVAL, workloads.Mixed, JDK 17 ($(nproc) cores, $(date -u +%Y-%m-%d))"
echo
echo "| tool | samples | file bytes | bytes/sample | time past the duration |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"

# A big recording: one file's chunks, again and again (JFR readers take chunk after chunk).
size=$(stat -c %s "$big_source")
copies=$(( (BIG_MB * 1024 * 1024 + size - 1) / size ))
for _ in $(seq "$copies"); do cat "$big_source"; done >"$work/big.jfr"
big_mb=$(( $(stat -c %s "$work/big.jfr") / 1024 / 1024 ))
# Each converter in turn, RUNS times (default 5): this shared machine's load moves single
# runs by a third, so the table gives each one's fastest and median run.
RUNS=${RUNS:-5}
declare -A took
convert_once() { # tool command...
    local tool=$1 start end
    shift
    start=$(now_ms)
    "$@" >/dev/null 2>&1
    end=$(now_ms)
    took[$tool]+="$((end - start)) "
}
for _ in $(seq "$RUNS"); do
    convert_once "jtap convert -e cpu" "$JTAP" convert "$work/big.jfr" -e cpu -o "$work/jtap.collapsed"
    if [[ -n "${ASPROF:-}" ]]; then
        JAVA_HOME=$JDK convert_once "jfrconv" "$(dirname "$ASPROF")/jfrconv" "$work/big.jfr" "$work/asprof.collapsed"
    fi
done
echo
echo "Conversion of $(basename "$big_source") repeated to $big_mb MiB ($copies chunks) to collapsed stacks, $RUNS runs each, alternating"
echo
echo "| tool | input | fastest | median | speed (fastest) |"
echo "|---|---|---|---|---|"
for tool in "jtap convert -e cpu" jfrconv; do
    [[ -n "${took[$tool]:-}" ]] || continue
    read -r fastest median < <(tr ' ' '\n' <<<"${took[$tool]}" | grep . | sort -n |
        awk '{t[NR]=$1} END {print t[1], t[int((NR+1)/2)]}')
    echo "| $tool | $big_mb MiB | $fastest ms | $median ms | $(( big_mb * 1000 / (fastest > 0 ? fastest : 1) )) MiB/s |"
done
