#!/bin/sh
# Whole command, a tree whose root runs N short children one after the other
# (subprocess.run(["true"])), under [trace] syscalls = cheap: launcher A vs
# launcher B (say an older build), interleaved, RUNS pairs, median wall time
# of each. Measures what each child's exit costs the tree (tracer_libcio.c:
# the program on the inherited event made each exit wait a grace period per
# libc site). Run as root from the repository root:
#   scripts/bench/child_exits.sh OLD/build/tts-launch build/tts-launch [N] [RUNS]
set -eu
A=$1 B=$2 N=${3:-10} RUNS=${4:-3}
CMD="import subprocess
for i in range($N): subprocess.run(['true'])"
wall() {
	s=$(date +%s.%N)
	"$1" run --set trace.syscalls=cheap --timeline '' -- /usr/bin/python3 -c "$CMD" >/dev/null 2>&1
	awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", e - s }'
}
ta="" tb=""
for i in $(seq "$RUNS"); do
	ta="$ta $(wall "$A")"
	sleep 3 # the keeper's closes: not in the next run's attach
	tb="$tb $(wall "$B")"
	sleep 3
done
med() { echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "children=$N runs=$RUNS"
echo "A $A: median $(med $ta) s (runs:$ta)"
echo "B $B: median $(med $tb) s (runs:$tb)"
