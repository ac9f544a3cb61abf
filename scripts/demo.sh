#!/usr/bin/env bash
# Builds jtap and its agent in release mode and shows the main job on a bundled Java workload:
# find the JVM, profile its CPU into an HTML flame graph and a text report, then look at its
# heap, all without JDK tools. Outputs land in target/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p jtap-cli -p jtap-agent
JTAP=target/release/jtap
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
out=target/demo
mkdir -p "$out/classes"
"$JDK/bin/javac" --release 11 -d "$out/classes" tests/java/workloads/Busy.java
"$JDK/bin/java" -cp "$out/classes" workloads.Busy 60 >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 1

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step $JTAP ps
step $JTAP jcmd "$pid" VM.version
step $JTAP profile "$pid" -d 5s -o "$out/flamegraph.html"
step $JTAP profile "$pid" -d 3s --format flat
step $JTAP heap "$pid" -n 8
printf '\nOpen %s in a browser: search, click to zoom, Icicle to flip.\n' "$(realpath "$out/flamegraph.html")"
