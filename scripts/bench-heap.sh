#!/usr/bin/env bash
# Class histogram timing: `jtap heap` (the JVM's heap inspection: all objects, and --live: full
# GC first), `jtap heap --walk` (jtap's agent's JVMTI walk: all objects, and --live) against
# `jcmd GC.class_histogram` (full GC + heap inspection), through jtap's own attach client and
# the JDK's jcmd when it has one, on a 1 GiB heap (-Xms1g -Xmx1g) holding
# FILL_MIB (default 600) MiB of small arrays, for every JDK found. Prints a Markdown table of
# the median and min wall time over RUNS (default 5) runs each.
#
# Usage: scripts/bench-heap.sh            (builds jtap and the agent in release mode first)
#        JTAP=path/to/jtap scripts/bench-heap.sh   (uses that build; its agent next to it)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
FILL_MIB=${FILL_MIB:-600}
if [[ -z "${JTAP:-}" ]]; then
    cargo build --release --quiet -p jtap-agent -p jtap-cli
    JTAP=target/release/jtap
fi
classes=$(mktemp -d)
pid=
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$classes"
}
trap cleanup EXIT
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$classes" tests/java/workloads/HeapShapes.java

jdk_homes() {
    for v in 11 17 21 25; do
        for home in "${JTAP_JDK:-}" ".cache/jdks/jdk$v" "/usr/lib/jvm/java-$v-openjdk-amd64" "/usr/lib/jvm/temurin-$v-jdk-amd64"; do
            if [[ -n "$home" && -x "$home/bin/java" ]] && grep -q "JAVA_VERSION=\"$v" "$home/release" 2>/dev/null; then
                echo "$v $home"
                break
            fi
        done
    done
}

# Milliseconds of wall time of one run of "$@" (output discarded; failure aborts).
time_ms() {
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null
    end=$(date +%s%N)
    echo $(((end - start) / 1000000))
}

# "median min" of RUNS runs of "$@".
stats() {
    local times=() i
    for ((i = 0; i < RUNS; i++)); do
        times+=("$(time_ms "$@")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1]}'
}

printf '| JDK | jtap heap | jtap heap --live | jtap heap --walk | jtap heap --walk --live | jtap jcmd GC.class_histogram | jcmd GC.class_histogram | objects |\n'
printf '|---|---|---|---|---|---|---|---|\n'
while read -r version home; do
    "$home/bin/java" -Xms1g -Xmx1g -cp "$classes" workloads.HeapShapes "$FILL_MIB" >"$classes/out" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q READY "$classes/out" && break; sleep 0.1; done
    grep -q READY "$classes/out" || { echo "JDK $version: workload did not start: $(cat "$classes/out")" >&2; exit 1; }
    "$JTAP" heap "$pid" -n 1 --walk >/dev/null # load the agent once, outside the timings
    objects=$("$JTAP" heap "$pid" --json -n 1 | awk -F': ' '/"total_instances"/ {gsub(",", "", $2); print $2}')
    read -r all_med all_min < <(stats "$JTAP" heap "$pid")
    read -r inspect_live_med inspect_live_min < <(stats "$JTAP" heap "$pid" --live)
    read -r walk_med walk_min < <(stats "$JTAP" heap "$pid" --walk)
    read -r live_med live_min < <(stats "$JTAP" heap "$pid" --walk --live)
    read -r jtap_jcmd_med jtap_jcmd_min < <(stats "$JTAP" jcmd "$pid" GC.class_histogram)
    if [[ -x "$home/bin/jcmd" ]]; then
        read -r jcmd_med jcmd_min < <(stats "$home/bin/jcmd" "$pid" GC.class_histogram)
        jcmd_cell="$jcmd_med ms (min $jcmd_min)"
    else
        jcmd_cell="– (no jcmd in this runtime)"
    fi
    printf '| %s | %s ms (min %s) | %s ms (min %s) | %s ms (min %s) | %s ms (min %s) | %s ms (min %s) | %s | %s |\n' "$version" \
        "$all_med" "$all_min" "$inspect_live_med" "$inspect_live_min" "$walk_med" "$walk_min" "$live_med" "$live_min" \
        "$jtap_jcmd_med" "$jtap_jcmd_min" "$jcmd_cell" "$objects"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
done < <(jdk_homes)
