#!/bin/bash
# What each of tts-launch's BPF programs costs the traced workload itself
# (issue 17): `tts-launch run -- python3 -c 'import torch'` with
# kernel.bpf_stats_enabled on; when the import is done (the workload says so
# and then sleeps, so the programs are still loaded) each program's runs,
# total run time and ns per run are read from tts-launch's descriptors. The
# figures include the stats' own clock reads (~20-40 ns a run), and the
# runs of the host-wide programs for other processes (the polling's grep and
# sleep: a few hundred runs); the counts are frozen before they are read.
# Programs kept from an earlier run count only this run's (their counts
# before it are subtracted).
#   scripts/bench/workload_prog_cost.sh [--set KEY=VALUE ...]   (as root)
# TTS_LAUNCH=BIN: another build (the one before a change) instead of build/tts-launch.
set -eu
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "workload_prog_cost: run as root" >&2; exit 1; }
bin=${TTS_LAUNCH:-build/tts-launch}
[ -x "$bin" ] || { echo "workload_prog_cost: $bin missing: build first (make)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tts-wl-cost.XXXXXX)
stats=/proc/sys/kernel/bpf_stats_enabled
was=$(cat $stats)
tts=
trap 'echo "$was" > $stats; [ -z "$tts" ] || kill "$tts" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
/usr/bin/python3 -c 'import torch' # the page cache warm, as a second start finds it
echo 1 > $stats
# programs kept loaded between runs ([trace] keep_loaded) carry the counts of
# earlier measured runs: each program's counts now, subtracted below
bpftool -j prog show | /usr/bin/python3 -c 'import json, sys
for p in json.load(sys.stdin):
    print(p["id"], p.get("run_time_ns", 0), p.get("run_cnt", 0))' > "$tmp/before"
"$bin" run "$@" --set app.dir="$tmp" --set log.file= --set service.pidfile= \
	--timeline "$tmp/t.json" -- /usr/bin/python3 -c \
	'import sys, time, torch; print("imported", flush=True); time.sleep(3)' > "$tmp/out" 2>&1 &
tts=$!
for _ in $(seq 300); do
	grep -q imported "$tmp/out" 2>/dev/null && break
	sleep 0.05
done
grep -q imported "$tmp/out" || { echo "workload_prog_cost: the import did not finish" >&2; exit 1; }
# the counts frozen: the reading below starts processes (awk, bpftool) whose
# syscalls and faults the host-wide programs would count too
echo 0 > $stats
printf '%-22s %9s %10s %8s\n' program runs "total ms" "ns/run"
for fd in /proc/"$tts"/fdinfo/*; do
	grep -q '^prog_type' "$fd" 2>/dev/null || continue
	awk '/^prog_id/{i=$2} /^run_time_ns/{t=$2} /^run_cnt/{c=$2} END{print i, t, c}' "$fd"
done | sort -u | while read -r id t c; do
	read -r t0 c0 < <(awk -v id="$id" '$1 == id {print $2, $3; f = 1} END {if (!f) print 0, 0}' "$tmp/before")
	t=$((t - t0))
	c=$((c - c0))
	[ "$c" -gt 0 ] || continue
	name=$(bpftool prog show id "$id" | head -1 | awk '{print $4}')
	[ -n "$name" ] || continue
	awk -v n="$name" -v c="$c" -v t="$t" 'BEGIN{printf "%-22s %9d %10.2f %8d\n", n, c, t / 1e6, t / c}'
done | sort -k3 -n -r
wait "$tts"
tts=
