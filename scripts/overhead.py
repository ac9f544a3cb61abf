"""The overhead arithmetic the benchmark scripts share: units of work per CPU second of the
JVM in a window, and each profiled window against the unprofiled windows beside it."""


def efficiency(points, start, end, cpu0, cpu1, hz):
    """Units of work per CPU second of the JVM between `start` and `end` (ms), from the
    (time ms, units done) `points` the driver reported and the JVM's CPU ticks at both ends."""
    inside = [(t, n) for t, n in points if start <= t <= end]
    if len(inside) < 2:
        return float("nan")
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    cpu = (cpu1 - cpu0) / hz * (t1 - t0) / max(1, end - start)
    return (n1 - n0) / cpu if cpu else float("nan")


def overheads(windows, key, efficiency_of):
    """Overheads in % by `key(window)` (None for an unprofiled window): each profiled window
    against the mean of the unprofiled windows around it."""
    out = {}
    for i, w in enumerate(windows):
        k = key(w)
        if k is None:
            continue
        base = (efficiency_of(windows[i - 1]) + efficiency_of(windows[i + 1])) / 2
        out.setdefault(k, []).append(100 * (1 - efficiency_of(w) / base))
    return out
