#!/usr/bin/env bash
# Continuous profiling soak (issue #15): a real workload (H2 under a JDBC load,
# tests/java/real/H2Load.java, Debian's libh2-java) profiled with
# `jtap profile start -e cpu,alloc --loop PERIOD --push URL` for DURATION seconds (default
# 600, period 10s), pushing to a local Pyroscope-style receiver (python3) that keeps every
# body. Then checks that no period was lost: one POST per period, `from`/`until` contiguous,
# each body a JFR recording that `jtap convert` reads with cpu and alloc samples. Prints a
# table and exits non-zero when a period is missing or unreadable.
set -euo pipefail
cd "$(dirname "$0")/.."
JDK=${JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
DURATION=${DURATION:-600}
PERIOD=${PERIOD:-10}
H2_JAR=/usr/share/java/h2.jar
[[ -f $H2_JAR ]] || scripts/setup-system.sh
source scripts/lib.sh

mkdir "$work/bodies"
cat >"$work/receiver.py" <<'EOF'
import http.server, sys, os, urllib.parse
out = sys.argv[1]
class Ingest(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        # The body is multipart/form-data with one part, "jfr": keep that part's bytes.
        boundary = self.headers["Content-Type"].split("boundary=")[1].encode()
        part = body.split(b"--" + boundary)[1]
        jfr = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        n = len(os.listdir(out))
        with open(os.path.join(out, "%05d-%s-%s.jfr" % (n, query["from"][0], query["until"][0])), "wb") as f:
            f.write(jfr)
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Ingest)
print(server.server_address[1], flush=True)
server.serve_forever()
EOF
python3 "$work/receiver.py" "$work/bodies" >"$work/port" &
receiver=$!
pids+=("$receiver")
until [[ -s $work/port ]]; do sleep 0.1; done
port=$(cat "$work/port")

"$JDK/bin/javac" -d "$work/classes" -cp "$H2_JAR" tests/java/real/H2Load.java tests/java/real/Progress.java
"$JDK/bin/java" -cp "$work/classes:$H2_JAR" real.H2Load 2 >"$work/out.log" 2>&1 &
pid=$!
sleep 3
"$JTAP" profile start "$pid" -e cpu,alloc --loop "${PERIOD}s" --push "http://127.0.0.1:$port" \
    --app soak --label run=soak-push
sleep "$DURATION"
status=$("$JTAP" profile status "$pid" 2>&1 || true)
"$JTAP" profile stop "$pid" >/dev/null 2>&1 || true
sleep 2
kill "$pid"
pid=

expected=$((DURATION / PERIOD))
received=0 unreadable=0 gaps=0 cpu=0 alloc=0 previous_until=
for body in "$work"/bodies/*.jfr; do
    [[ -e $body ]] || break
    received=$((received + 1))
    name=${body##*/}
    from=$(cut -d- -f2 <<<"$name")
    until=$(cut -d- -f3 <<<"${name%.jfr}")
    if [[ -n $previous_until && $from != "$previous_until" ]]; then gaps=$((gaps + 1)); fi
    previous_until=$until
    c=$("$JTAP" convert "$body" -e cpu --format collapsed 2>/dev/null | awk '{s += $NF} END {print s + 0}') || c=0
    a=$("$JTAP" convert "$body" -e alloc --format collapsed --counter samples 2>/dev/null | awk '{s += $NF} END {print s + 0}') || a=0
    if ((c == 0 || a == 0)); then unreadable=$((unreadable + 1)); fi
    cpu=$((cpu + c)) alloc=$((alloc + a))
done

echo "Continuous profiling soak: H2Load, JDK $("$JDK/bin/java" -version 2>&1 | awk -F'"' 'NR==1 {print $2}'), ${DURATION} s at --loop ${PERIOD}s --push ($(nproc) cores, $(date -u +%Y-%m-%d))"
echo
echo "| periods expected (at least) | pushed and received | gaps between periods | periods without cpu or alloc samples | cpu samples | alloc samples |"
echo "|---|---|---|---|---|---|"
echo "| $expected | $received | $gaps | $unreadable | $cpu | $alloc |"
echo
echo "agent status at the end: $(grep -i push <<<"$status" || echo "$status" | head -3)"
((received >= expected && gaps == 0 && unreadable == 0))
