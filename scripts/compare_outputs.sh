#!/bin/sh
# compare_outputs.sh OLD NEW [DIR|LIST]: `report --format json` and
# `diagnose --format json` of every saved timeline (timeline*.json over 1 KiB
# under DIR, default /tmp; or the paths listed one a line in the file LIST)
# by two tts-launch binaries, byte for byte, and their exit statuses. Prints
# each difference and a summary; exit 1 when any output differs.
set -u
old=${1:?usage: compare_outputs.sh OLD NEW [DIR|LIST]}
new=${2:?usage: compare_outputs.sh OLD NEW [DIR|LIST]}
where=${3:-/tmp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$where" ]; then
	cp "$where" "$tmp/list"
else
	find "$where" -name 'timeline*.json' -size +1k 2>/dev/null | sort >"$tmp/list"
fi
n=0 same=0 diff=0
while IFS= read -r t; do
	[ -f "$t" ] || continue
	n=$((n + 1))
	for cmd in "report --format json" "diagnose --format json"; do
		# shellcheck disable=SC2086
		"$old" $cmd "$t" >"$tmp/old" 2>"$tmp/old.err"
		o=$?
		# shellcheck disable=SC2086
		"$new" $cmd "$t" >"$tmp/new" 2>"$tmp/new.err"
		r=$?
		if [ "$o" = "$r" ] && cmp -s "$tmp/old" "$tmp/new" &&
			cmp -s "$tmp/old.err" "$tmp/new.err"; then
			same=$((same + 1))
		else
			diff=$((diff + 1))
			echo "DIFF: $cmd $t (exit $o vs $r)"
			diff "$tmp/old" "$tmp/new" | head -5
			diff "$tmp/old.err" "$tmp/new.err" | head -3
		fi
	done
done <"$tmp/list"
echo "timelines: $n, outputs identical: $same, different: $diff"
[ "$diff" = 0 ]
