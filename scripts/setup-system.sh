#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need (listed in
# scripts/debian-packages.txt), when they are missing, and mounts tracefs (the ids of kernel
# tracepoints, for `-e sched:sched_switch`) where it is not. Needs root (or sudo) for
# apt-get and mount; without either it only reports what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -e /sys/kernel/tracing/events ]] && [[ $(id -u) -eq 0 ]]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null \
        || echo "setup-system: cannot mount tracefs: tracepoint tests will be skipped" >&2
fi

mapfile -t wanted < <(grep -v '^\s*#' scripts/debian-packages.txt | awk 'NF {print $1}')
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
    exit 0
fi
echo "setup-system: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
        echo "setup-system: not root and no sudo: install ${missing[*]} by hand" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
