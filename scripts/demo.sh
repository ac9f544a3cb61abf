#!/usr/bin/env bash
# Builds jtap in release mode and shows it on a bundled Java workload: list the JVM, read
# its properties, run jcmd commands and take a thread dump, all without JDK tools.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p jtap-cli
JTAP=target/release/jtap
JAVA=${JAVA:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}
classes=$(mktemp -d)
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$classes" tests/java/workloads/Busy.java
"$JAVA" -cp "$classes" workloads.Busy 30 >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$classes"' EXIT
sleep 1

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step $JTAP ps
step $JTAP jcmd "$pid" VM.version
step $JTAP attach "$pid" printflag MaxHeapSize
step sh -c "$JTAP attach $pid threaddump | grep -A3 '\"worker-'"
step sh -c "$JTAP jcmd $pid GC.class_histogram | head -8"
