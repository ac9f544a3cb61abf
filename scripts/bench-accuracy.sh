#!/usr/bin/env bash
# Accuracy against a ground truth (issue #38), jtap beside async-profiler and JFR in the same
# JVMs. Builds jtap in release mode and, for each JDK in BENCH_JDKS (default "17 25"), runs
# one JVM per workload whose true shares are known:
#   - burn: tests/java/workloads/Burn.java, three methods burning CPU 1:2:4 by construction
#     (threads taking turns, so the ratio holds however busy the machine is) — cpu;
#   - allocsites: tests/java/workloads/AllocSites.java, three sites allocating bytes 1:2:4 —
#     alloc;
#   - h2, javac: tests/java/real/Injected.java, an H2 transaction or a javac round on one
#     thread, each followed by injected work that takes SHARE % (default 20) of the thread's
#     CPU and of its allocated bytes, as the thread itself measures them (its CPU time, wall
#     time and allocated bytes per part) — cpu, wall and alloc.
# Each profiler records each event for BENCH_WINDOW seconds (default 10), RUNS times (default
# 3): jtap (`profile -e EVENT`), JFR (`jcmd JFR.start settings=profile`, read by `jtap
# convert`; JFR has no wall-clock sampler) and async-profiler (bin/asprof at ASPROF; skipped,
# saying so, when unset), cpu and wall at INTERVAL (default 1ms; JFR's ExecutionSample period
# too), alloc every ALLOC bytes (default 512k; JFR throttles its allocation samples by time
# instead, to JFR_THROTTLE, default 1000/s, about as many). async-profiler's runs come last: it
# keeps the allocation-sampling capability, which one JVMTI environment holds at a time.
#
# A profile's share of a method is the weight of its stacks through that method over the weight
# of the stacks the truth is about (the three methods' for burn and allocsites, the worker
# thread's for h2 and javac). The error of a run is the largest difference from the truth, in
# percentage points. Prints one Markdown table: each profiler's mean and largest error over the
# runs, its samples (or bytes) per run, and the program's hottest method by self weight (the
# injected work left out) with how many runs agree on it. For h2 and javac, also each
# profile's total against the thread's own measure: samples times the interval against its
# CPU time (cpu) or wall time (wall), bytes against its allocated bytes (alloc).
set -euo pipefail
cd "$(dirname "$0")/.."
JDKS=${BENCH_JDKS:-17 25}
WINDOW=${BENCH_WINDOW:-10}
RUNS=${RUNS:-3}
SHARE=${SHARE:-20}
INTERVAL=${INTERVAL:-1ms}
JFR_THROTTLE=${JFR_THROTTLE:-1000/s}
ALLOC=${ALLOC:-512k}
WORKLOADS=${WORKLOADS:-burn allocsites h2 javac}
source scripts/lib.sh
jars=/usr/share/java/h2.jar:/usr/share/java/ecj.jar
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac --release 11 -d "$work/classes" -cp "$jars" \
    tests/java/workloads/Burn.java tests/java/workloads/AllocSites.java \
    tests/java/real/Injected.java tests/java/real/H2Load.java tests/java/real/JavacLoop.java \
    tests/java/real/Progress.java

# Runs a profiler quietly; on failure shows what it said and fails.
quiet() { "$@" >/dev/null 2>"$work/said" || { cat "$work/said" >&2; return 1; }; }

windows=() # "jdk workload event tool run file driver-log start-ms end-ms"
record() { # tool event run
    local tool=$1 event=$2 run=$3 file start end
    file=$work/$jdk-$workload-$event-$tool-$run.collapsed
    case $tool in
        jtap)
            local rate=(-i "$INTERVAL")
            [[ $event == alloc ]] && rate=(--alloc-interval "$ALLOC")
            quiet "$JTAP" profile "$pid" -e "$event" "${rate[@]}" --threads -d "${WINDOW}s" -o "$file"
            end=$(now_ms) ;;
        jfr)
            quiet "$home/bin/jcmd" "$pid" JFR.start name=accuracy settings=profile \
                "jdk.ExecutionSample#period=$INTERVAL" "jdk.ObjectAllocationSample#throttle=$JFR_THROTTLE"
            start=$(now_ms)
            sleep "$WINDOW"
            end=$(now_ms)
            quiet "$home/bin/jcmd" "$pid" JFR.stop name=accuracy filename="$file.jfr"
            quiet "$JTAP" convert "$file.jfr" -e "$event" --threads -o "$file" ;;
        asprof)
            local rate=(-i "$INTERVAL")
            [[ $event == alloc ]] && rate=(--alloc "$ALLOC" --total)
            quiet "$ASPROF" -e "$event" "${rate[@]}" -t -d "$WINDOW" -o collapsed -f "$file" "$pid"
            end=$(now_ms) ;;
    esac
    # jtap and async-profiler sample for the last WINDOW seconds before they return.
    start=${start:-$((end - WINDOW * 1000))}
    windows+=("$jdk $workload $event $tool $run $file $log $start $end")
}

tools=(jtap jfr)
if [[ -n "${ASPROF:-}" ]]; then tools+=(asprof); else echo "ASPROF is not set: async-profiler is skipped"; fi
echo "cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); window ${WINDOW} s, $RUNS runs, interval $INTERVAL, alloc $ALLOC, injected share $SHARE %"
for jdk in $JDKS; do
    home=$(java_home "$jdk")
    [[ -n "$home" ]] || { echo "JDK $jdk not found" >&2; continue; }
    echo "JDK $jdk: $("$home/bin/java" -version 2>&1 | head -1)"
    for workload in $WORKLOADS; do
        case $workload in
            burn) main=(workloads.Burn) events=(cpu) ;;
            allocsites) main=(workloads.AllocSites) events=(alloc) ;;
            h2) main=(real.Injected h2 "$SHARE") events=(cpu wall alloc) ;;
            javac) main=(real.Injected javac "$SHARE" tests/java/workloads) events=(cpu wall alloc) ;;
        esac
        log=$work/$jdk-$workload.log
        "$home/bin/java" -cp "$work/classes:$jars" "${main[@]}" >"$log" 2>&1 &
        pid=$!
        until grep -q READY "$log" 2>/dev/null; do sleep 0.1; done
        sleep 10 # past the JIT's first compilations
        for tool in "${tools[@]}"; do
            for ((run = 1; run <= RUNS; run++)); do
                for event in "${events[@]}"; do
                    [[ $tool == jfr && $event == wall ]] || record "$tool" "$event" "$run"
                done
            done
        done
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        pid=
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
INTERVAL=$INTERVAL python3 scripts/accuracy.py "${windows[@]}"
