# Sourced by the benchmark and soak scripts, from the repository's root: builds jtap in
# release mode and sets JTAP (the client) and JTAP_AGENT (its agent library, exported);
# makes a work directory, $work; defines java_home (a JDK's home by major version) and
# now_ms. At exit the JVM in $pid and the processes in the pids
# array are killed and $work is removed.
cargo build --release --quiet -p jtap-agent -p jtap-cli
JTAP=$PWD/target/release/jtap
export JTAP_AGENT=$PWD/target/release/libjtap_agent.so
work=$(mktemp -d)
pid=
pids=()
trap 'for p in $pid "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
# The home of the JDK of major version $1: the one setup-jdks.sh cached, else Debian's or
# Temurin's; nothing when none is installed.
java_home() {
    local home
    for home in ".cache/jdks/jdk$1" "/usr/lib/jvm/java-$1-openjdk-amd64" "/usr/lib/jvm/temurin-$1-jdk-amd64"; do
        [[ -x "$home/bin/java" ]] && grep -q "JAVA_VERSION=\"$1" "$home/release" 2>/dev/null && { echo "$home"; return; }
    done
    return 0
}
now_ms() { date +%s%3N; }
