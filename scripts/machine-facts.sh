#!/usr/bin/env bash
# Prints the facts of this machine the test suite depends on, one per line, so that a
# failure can be read against them. Which tests use each:
# - invariant TSC: the probes' clock (else the monotonic clock; both paths are unit-tested);
# - perf_events: `-e cpu` (else it falls back to ctimer; the fallback is tested under seccomp);
# - root: the other-user and container attach tests (skipped, with a message, when not root);
# - cores and the kernel's timer tick: the shares and rates of the statistical profile tests.
set -uo pipefail
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { [[ " $flags " == *" $1 "* ]]; }
if has constant_tsc && has nonstop_tsc; then tsc="invariant"; elif has tsc; then tsc="present, not invariant"; else tsc="absent"; fi
mhz=$(awk -F: '/^cpu MHz/ {printf "%.0f MHz", $2; exit}' /proc/cpuinfo)
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo unknown)
hz=$(getconf CLK_TCK 2>/dev/null)
echo "machine: $(nproc) cores (${mhz:-? MHz}), TSC $tsc, perf_event_paranoid $paranoid, uid $(id -u)$( [[ $(id -u) -eq 0 ]] && echo ' (root)'), kernel $(uname -r), USER_HZ $hz"
