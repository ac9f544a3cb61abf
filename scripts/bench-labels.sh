#!/usr/bin/env bash
# What request labels cost (issue #35): a cpu profile of an embedded Jetty under load with
# `--by` beside the same profile without it. Builds jtap in release mode and runs
# tests/java/real/JettyLoad.java (CLIENTS client threads, default 4, requesting a light
# handler over keep-alive connections: thousands of requests per second, so a per-request
# cost shows). In one JVM run it alternates unprofiled windows with profiled ones: cpu at
# INTERVAL (default 10ms); the same labelled by the handlers (`--by
# +AbstractHandler::handle`: Jetty's Server and the application's handler, one inside the
# other, labelled by the method's name); and labelled by the request's target (`=arg1`: a
# new string per request, read each time). A profiled window is measured from 2 s after its
# profile starts to 2 s before it ends: the steady cost per request, without the
# instrumentation at the start and the restore at the end (and HotSpot recompiling what
# they changed), which every labelled session pays once. Each profiled window is compared
# with the mean of the unprofiled windows around it, in requests per CPU second of the whole
# JVM. Prints a Markdown table: requests per second unprofiled, and the median
# overhead of each setting over ROUNDS rounds (default 3) of BENCH_WINDOW seconds (default 8).
# Environment: JAVA (default JDK 17), CLIENTS, INTERVAL, ROUNDS, BENCH_WINDOW.
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA=${JAVA:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}
WINDOW=${BENCH_WINDOW:-8}
ROUNDS=${ROUNDS:-3}
INTERVAL=${INTERVAL:-10ms}
CLIENTS=${CLIENTS:-4}
source scripts/lib.sh
jars=$(printf '/usr/share/java/%s.jar:' jetty9-server jetty9-http jetty9-io jetty9-util servlet-api)
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -cp "$jars" -d "$work/classes" \
    tests/java/real/JettyLoad.java tests/java/real/Progress.java
# The driver prints PROGRESS <requests> every 250 ms; each line is stamped as it comes.
"$JAVA" -Xmx256m -cp "$work/classes:$jars" real.JettyLoad "$CLIENTS" |
    while read -r line; do echo "$(date +%s%3N) $line"; done >"$work/progress.log" &
until grep -q READY "$work/progress.log"; do sleep 0.1; done
pid=$(pgrep -f "real.JettyLoad $CLIENTS" | head -1)

now_ms() { date +%s%3N; }
# utime + stime of the whole JVM, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; }

handler='+org.eclipse.jetty.server.handler.AbstractHandler::handle'
declare -A args=(
    [cpu]="-e cpu -i $INTERVAL"
    [by-handler]="-e cpu -i $INTERVAL --by $handler"
    [by-target]="-e cpu -i $INTERVAL --by $handler=arg1"
)
settings=(cpu by-handler by-target)

windows=() # "setting start-ms end-ms start-ticks end-ticks"
window() {
    local setting=$1 start cpu profile=
    if [[ $setting != base ]]; then
        # shellcheck disable=SC2086 # the settings are words
        "$JTAP" profile "$pid" ${args[$setting]} -d "$((WINDOW + 4))s" --format summary >/dev/null 2>&1 &
        profile=$!
        sleep 2
    fi
    start=$(now_ms)
    cpu=$(cpu_ticks)
    sleep "$WINDOW"
    windows+=("$setting $start $(now_ms) $cpu $(cpu_ticks)")
    if [[ -n $profile ]]; then
        wait "$profile"
    fi
}

echo "JVM: $("$JAVA" -version 2>&1 | head -1); cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, ${ROUNDS} rounds, ${CLIENTS} clients"
sleep $((WINDOW * 2)) # warm-up
for setting in "${settings[@]}"; do # loads the agent, instruments once (HotSpot recompiles)
    # shellcheck disable=SC2086
    "$JTAP" profile "$pid" ${args[$setting]} -d 2s --format summary >/dev/null 2>&1
done
sleep "$WINDOW"
window base
for ((round = 0; round < ROUNDS; round++)); do
    for setting in "${settings[@]}"; do
        window "$setting"
        window base
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work/progress.log" "$(getconf CLK_TCK)" "${windows[@]}" <<'PY'
import statistics, sys
log, hz, windows = sys.argv[1], int(sys.argv[2]), [w.split() for w in sys.argv[3:]]
points = [(int(l.split()[0]), int(l.split()[2])) for l in open(log) if " PROGRESS " in l]

sys.path.insert(0, "scripts")
from overhead import efficiency, overheads

def rate(w):
    inside = [(t, n) for t, n in points if int(w[1]) <= t <= int(w[2])]
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) * 1000 / max(1, t1 - t0)

overheads = overheads(
    [[w[0], "-"] + w[1:] for w in windows],
    lambda w: None if w[0] == "base" else w[0],
    lambda w: efficiency(points, *map(int, w[2:6]), hz),
)
base = statistics.median(rate(w) for w in windows if w[0] == "base")
print()
print(f"Unprofiled: {base:,.0f} requests/s")
print()
print("| setting | jtap overhead (requests per CPU second) |")
print("|---|---|")
names = {"cpu": "cpu profile", "by-handler": "cpu profile --by +AbstractHandler::handle", "by-target": "cpu profile --by +AbstractHandler::handle=arg1 (target)"}
for s in ["cpu", "by-handler", "by-target"]:
    print(f"| {names[s]} | {statistics.median(overheads[s]):.2f}% |")
PY
