# Sourced by the benchmark and soak scripts, from the repository's root: builds jtap in
# release mode and sets JTAP (the client) and JTAP_AGENT (its agent library, exported);
# makes a work directory, $work. At exit the JVM in $pid and the processes in the pids
# array are killed and $work is removed.
cargo build --release --quiet -p jtap-agent -p jtap-cli
JTAP=$PWD/target/release/jtap
export JTAP_AGENT=$PWD/target/release/libjtap_agent.so
work=$(mktemp -d)
pid=
pids=()
trap 'for p in $pid "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
