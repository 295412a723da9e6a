/* Fuzz target: `tts-launch compare BEFORE.json AFTER.json`. The input holds
 * both timelines, split at its first NUL byte (JSON text has none); without
 * one, the timeline is compared with itself. Both must load, then
 * compare_build and its text and JSON output must take them without a
 * crash, a sanitizer report or unbounded work. */
#include <stdint.h>
#include <string.h>

#include "compare.h"
#include "fuzz.h"
#include "timeline.h"

#define FUZZ_MAX_INPUT (256 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t before_len = nul ? (size_t)(nul - data) : size;
	struct timeline *before, *after = NULL;
	char err[1024];
	struct compare *cmp;

	if (size > FUZZ_MAX_INPUT)
		return -1;
	before = timeline_load(fuzz_file(0, data, before_len), err, sizeof(err));
	if (!before)
		return 0;
	if (nul) {
		after =
		    timeline_load(fuzz_file(1, nul + 1, size - before_len - 1), err, sizeof(err));
		if (!after) {
			timeline_free(before);
			return 0;
		}
	}
	cmp = compare_build(before, after ? after : before, "before.json", "after.json");
	if (cmp) {
		compare_print_text(cmp, fuzz_out());
		compare_write_json(cmp, fuzz_out());
		compare_free(cmp);
	}
	timeline_free(after);
	timeline_free(before);
	return 0;
}
