#!/bin/bash
# What each of tts-launch's BPF programs costs per run while it traces
# something else (issue 17): tts-launch runs `sleep 30` under tracing; with
# kernel.bpf_stats_enabled on, a pinned ping-pong (two processes on one CPU:
# two context switches and two wake-ups per round trip) runs beside it, and
# each program's run_time_ns / run_cnt over that run is printed (programs
# that ran more than 1000 times). The figures include the stats' own clock
# reads (~20-40 ns a run).
#   scripts/bench/prog_cost.sh [--set KEY=VALUE ...]   (as root)
set -eu
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "prog_cost: run as root" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tts-prog-cost.XXXXXX)
stats=/proc/sys/kernel/bpf_stats_enabled
was=$(cat $stats)
trap 'echo "$was" > $stats; kill "$tts" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/pingpong" scripts/bench/pingpong.c
echo 1 > $stats
build/tts-launch run "$@" --set app.dir="$tmp" --set log.file= --set service.pidfile= \
	--timeline "$tmp/t.json" -- /bin/sleep 30 > /dev/null 2>&1 &
tts=$!
sleep 3
snap() {
	for fd in /proc/$tts/fdinfo/*; do
		grep -q '^prog_type' "$fd" 2>/dev/null || continue
		awk '/^prog_id/{i=$2} /^run_time_ns/{t=$2} /^run_cnt/{c=$2} END{print i, t, c}' "$fd"
	done | sort -u
}
snap > "$tmp/before"
taskset -c 1 "$tmp/pingpong" 50000
snap > "$tmp/after"
join "$tmp/before" "$tmp/after" | while read -r id t0 c0 t1 c1; do
	n=$((c1 - c0))
	[ "$n" -gt 1000 ] || continue
	name=$(bpftool prog show id "$id" | head -1 | awk '{print $4}')
	printf '%-20s runs %8d  %5d ns/run\n' "$name" "$n" $(((t1 - t0) / n))
done
