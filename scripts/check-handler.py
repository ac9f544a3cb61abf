#!/usr/bin/env python3
"""Checks that jtap's signal handler can neither panic, allocate nor lock, in the agent users run.

A panic in the handler cannot unwind out of it (the handler is `extern "C"`), so it aborts the
JVM; an allocation or a lock can deadlock a thread interrupted inside malloc or holding that
lock. Reading the code cannot show this for every path the compiler keeps, so this reads the
machine code instead: it builds the release agent, disassembles it (binutils' objdump), follows
every direct call, every call through the GOT and every function whose address is taken
(a function pointer or closure handed on) from the handler's entry point, and fails
naming each call site (file:line, from the line tables) that reaches a function which panics
(`core::panicking::*`, failed slice indexing, `unwrap`/`expect` failures), allocates (Rust's
allocator, malloc and friends), locks (pthread mutexes, std's futex locks) or touches
thread-local storage through `__tls_get_addr` (which allocates on a thread's first access in a
library loaded late, as the agent is). Pointers to functions outside the library (the VM's
`AsyncGetCallTrace` and `SafeFetchN`, a chained handler) are not followed: they are not
jtap's code.

No crate disassembles and resolves PLT/GOT calls of a shared library into a call graph, and
`cargo-call-stack` needs a nightly compiler; objdump's text is simple to read.

Usage: scripts/check-handler.py [LIBRARY] (default: builds target/release/libjtap_agent.so).
"""
import collections
import re
import subprocess
import sys

ENTRY_POINTS = [r"^_ZN10jtap_agent8sampling6signal6handle17h"]
FORBIDDEN = re.compile(
    r"^(core::panicking::|core::slice::index::slice_\w*fail|core::str::slice_error_fail"
    r"|core::option::(unwrap|expect)_failed|core::result::unwrap_failed|core::cell::panic_"
    r"|std::panicking::|std::sys::sync::|alloc::raw_vec::|alloc::alloc::handle_alloc_error"
    r"|__rust_alloc|__rust_realloc|__rust_alloc_zeroed|__rust_dealloc"
    r"|(malloc|calloc|realloc|free|posix_memalign|pthread_mutex_lock|__tls_get_addr)$)"
)
# What the compiler calls where an unwind would leave an `extern "C"` function: reached only
# if a callee unwinds, and every callee is checked here (the compiler cannot prove it of calls
# through function pointers).
ALLOWED = {"core::panicking::panic_cannot_unwind"}
HEADER = re.compile(r"^([0-9a-f]+) <(.+)>:$")
DIRECT = re.compile(r"^\s+([0-9a-f]+):\s+(?:call|jmp)\w*\s+[0-9a-f]+ <([^+>]+)")
THROUGH_GOT = re.compile(r"^\s+([0-9a-f]+):\s+(?:call|jmp)\w*\s+\*0x[0-9a-f]+\(%rip\)\s+# ([0-9a-f]+)")
# A function's address taken (a function pointer or closure passed on): counted as a call.
ADDRESS_TAKEN = re.compile(r"^\s+([0-9a-f]+):\s+lea\s+\S+\(%rip\),%\w+\s+# ([0-9a-f]+) <([^+>]+)>$")


def run(*command):
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def got_targets(library):
    """GOT slot -> ('address', a) for a slot relocated to a local address, ('symbol', s) else."""
    slots = {}
    for line in run("objdump", "-R", library).splitlines():
        fields = line.split()
        if len(fields) != 3:
            continue
        if fields[1] == "R_X86_64_RELATIVE":
            slots[int(fields[0], 16)] = ("address", int(fields[2].split("+")[1], 16))
        elif fields[1] in ("R_X86_64_GLOB_DAT", "R_X86_64_JUMP_SLOT"):
            slots[int(fields[0], 16)] = ("symbol", fields[2].split("@")[0])
    return slots


def call_graph(library):
    """function -> [(call site address, callee)] for direct and GOT calls."""
    slots = got_targets(library)
    starts, calls, through_got = {}, collections.defaultdict(list), []
    function = None
    for line in run("objdump", "-d", "--no-show-raw-insn", library).splitlines():
        if m := HEADER.match(line):
            function = m.group(2)
            starts[int(m.group(1), 16)] = function
        elif function and (m := DIRECT.match(line)):
            if m.group(2) != function:
                calls[function].append((int(m.group(1), 16), m.group(2).split("@")[0]))
        elif function and (m := ADDRESS_TAKEN.match(line)):
            if m.group(3) != function:
                calls[function].append((int(m.group(1), 16), m.group(3)))
        elif function and (m := THROUGH_GOT.match(line)):
            through_got.append((function, int(m.group(1), 16), int(m.group(2), 16)))
    for function, site, slot in through_got:
        kind, value = slots.get(slot, (None, None))
        callee = starts.get(value) if kind == "address" else value
        if callee and callee != function:
            calls[function].append((site, callee))
    return calls


def demangle(names):
    names = sorted(names)
    plain = run_with_input(["c++filt"], "\n".join(names)).splitlines()
    # v0 symbols carry crate hashes in brackets, legacy ones a trailing hash.
    return {n: re.sub(r"\[[0-9a-f]+\]|::h[0-9a-f]{16}$", "", d) for n, d in zip(names, plain)}


def run_with_input(command, text):
    return subprocess.run(command, input=text, capture_output=True, text=True, check=True).stdout


def source_lines(library, address):
    """The project's source lines of a call site, innermost inlined first."""
    lines = run("addr2line", "-e", library, "-i", hex(address)).split()
    return [l.split("/crates/", 1)[1] for l in lines if "/crates/" in l] or lines[:1]


def main():
    if len(sys.argv) > 1:
        library = sys.argv[1]
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "jtap-agent"], check=True)
        library = "target/release/libjtap_agent.so"
    calls = call_graph(library)
    names = set(calls) | {callee for sites in calls.values() for _, callee in sites}
    plain = demangle(names)
    roots = [n for n in names if any(re.search(p, n) for p in ENTRY_POINTS)]
    if len(roots) != len(ENTRY_POINTS):
        sys.exit(f"check-handler: entry points not found in {library}: {ENTRY_POINTS}")
    reached, queue, findings = set(roots), collections.deque(roots), []
    while queue:
        function = queue.popleft()
        for site, callee in calls.get(function, ()):
            name = plain.get(callee, callee)
            if name in ALLOWED:
                continue
            if FORBIDDEN.match(name):
                findings.append((site, function, callee))
            elif callee not in reached:
                reached.add(callee)
                queue.append(callee)
    for site, function, callee in findings:
        where = " <- ".join(source_lines(library, site))
        print(f"check-handler: {plain.get(callee, callee)} reachable from the signal handler, "
              f"in {plain.get(function, function)} at {where}")
    print(f"check-handler: {len(reached)} functions reachable from the signal handler, "
          f"{len(findings)} calls that panic, allocate or lock")
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
