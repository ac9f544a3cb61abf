"""The arithmetic of scripts/bench-accuracy.sh: each profile's share of its samples in the
methods whose true share is known, its error against that truth, and the program's hottest
method by self samples, in one Markdown table.

Arguments: one word list per profiled window,
"jdk workload event tool run collapsed-file driver-log start-ms end-ms": the driver's TRUTH
lines (time in ms, then six running totals) nearest before the window's start and end give
the truth of the injected workloads. INTERVAL in the environment (`1ms`) is the sampling
interval of cpu and wall."""

import os
import re
import statistics
import sys
from collections import Counter, defaultdict

# Workloads whose shares hold by construction: the methods and their true shares in %.
BY_CONSTRUCTION = {
    "burn": {m: s for m, s in zip(("Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"), (100 / 7, 200 / 7, 400 / 7))},
    "allocsites": {m: s for m, s in zip(("AllocSites.intSite", "AllocSites.longSite", "AllocSites.byteSite"), (100 / 7, 200 / 7, 400 / 7))},
}
# The injected method of each event, and the TRUTH totals (injected, whole thread) its share
# comes from.
INJECTED = {"cpu": ("Injected.injectedCpu", 0, 1), "wall": ("Injected.injectedCpu", 2, 3), "alloc": ("Injected.injectedAlloc", 4, 5)}
WORKER = "injected-worker"


def frame(text):
    """A frame as `package.Class.method`, whatever the tool's spelling: async-profiler's
    slashes and `_[j]` kinds, JFR's converted names."""
    text = re.sub(r"_\[.\]$", "", text)
    return text.replace("/", ".")


def stacks(path):
    """(frames root first, weight) of each line of a collapsed-stacks file."""
    out = []
    for line in open(path, errors="replace"):
        head, _, weight = line.rstrip("\n").rpartition(" ")
        if head and weight.isdigit():
            out.append(([frame(f) for f in head.split(";")], int(weight)))
    return out


def holds(frames, method):
    return any(f == method or f.endswith("." + method) for f in frames)


def shares(samples, methods, within):
    """Each method's share in % of the weight of the stacks `within` accepts."""
    total = sum(w for f, w in samples if within(f))
    return {m: 100 * sum(w for f, w in samples if within(f) and holds(f, m)) / max(total, 1) for m in methods}, total


def on_worker(frames):
    return bool(frames) and WORKER in frames[0]


def truths(log):
    """The driver's TRUTH lines: (time ms, six running totals)."""
    out = []
    for line in open(log, errors="replace"):
        words = line.split()
        if words[:1] == ["TRUTH"] and len(words) == 8:
            out.append((int(words[1]), list(map(int, words[2:]))))
    return out


def at(lines, ms):
    """The totals of the last line printed at or before `ms` (else the first)."""
    before = [totals for t, totals in lines if t <= ms]
    return before[-1] if before else lines[0][1]


def truth_of(workload, event, log, start, end):
    """The true shares in %, and the thread's own total of the event's unit over the window
    (None for the workloads known by construction)."""
    if workload in BY_CONSTRUCTION:
        return BY_CONSTRUCTION[workload], None
    method, injected, total = INJECTED[event]
    lines = truths(log)
    b, a = at(lines, int(start)), at(lines, int(end))
    whole = a[total] - b[total]
    return {method: 100 * (a[injected] - b[injected]) / max(1, whole)}, whole


def interval_ns():
    text = os.environ.get("INTERVAL", "10ms")
    number = float(re.match(r"[\d.]+", text).group())
    return number * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[re.search(r"[a-z]+$", text).group()]


JAVA_METHOD = re.compile(r"^[\w$]+(\.[\w$]+)*\.[\w$<>]+$")


def hottest(samples, within, skip, event):
    """The Java method with the most self weight among the stacks `within` accepts, leaving
    out the stacks through `skip` (the injected work): the deepest Java frame of each stack,
    below which only native frames, jtap's state frames and (alloc) the allocated type lie."""
    self_weight = Counter()
    for f, w in samples:
        if within(f) and not holds(f, skip):
            frames = f[:-1] if event == "alloc" else f
            java = [x for x in frames[1:] if JAVA_METHOD.match(x)]
            self_weight[".".join(java[-1].split(".")[-2:]) if java else "-"] += w
    return self_weight.most_common(1)[0][0] if self_weight else "-"


def bias(runs):
    """The mean signed difference from the truth of the method whose mean differs most, in
    points, with its standard error over the runs."""
    means = {m: statistics.mean(r[m] for r in runs) for m in runs[0]}
    method = max(means, key=lambda m: abs(means[m]))
    error = statistics.stdev(r[method] for r in runs) / len(runs) ** 0.5 if len(runs) > 1 else float("nan")
    return f"{means[method]:+.2f} ± {error:.2f}"


def main():
    windows = [w.split() for w in sys.argv[1:]]
    errors, tops, counts, totals, signed = (defaultdict(list) for _ in range(5))
    for jdk, workload, event, tool, _run, path, log, start, end in windows:
        truth, whole = truth_of(workload, event, log, start, end)
        samples = stacks(path)
        if workload in BY_CONSTRUCTION:
            within = lambda f: any(holds(f, m) for m in truth)  # noqa: E731
            skip = "-"
        else:
            within, skip = on_worker, INJECTED[event][0]
        got, total = shares(samples, truth, within)
        key = (jdk, workload, event, tool)
        errors[key].append(max(abs(got[m] - truth[m]) for m in truth))
        signed[key].append({m: got[m] - truth[m] for m in truth})
        counts[key].append(total)
        tops[key].append(hottest(samples, within, skip, event))
        if whole:
            estimate = total if event == "alloc" else total * interval_ns()
            totals[key].append(estimate / whole)
    print("| JDK | workload | event | profiler | error, points (mean; max) | bias, points (mean ± s.e.) | weight per run | total vs the thread's | hottest method, runs agreeing |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(errors, key=lambda k: (k[0], k[1], k[2], k[3] != "jtap", k[3])):
        e, top = errors[key], Counter(tops[key])
        name, agreeing = top.most_common(1)[0]
        weight = f"{statistics.median(counts[key]):,.0f}"
        ratio = f"{statistics.median(totals[key]):.2f}×" if totals[key] else "—"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {statistics.mean(e):.2f} ({max(e):.2f}) | {bias(signed[key])} | {weight} | {ratio} | `{name}` {agreeing}/{len(e)} |")


if __name__ == "__main__":
    main()
