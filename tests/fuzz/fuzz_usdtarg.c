/* fuzz_usdtarg: launcher/usdtarg.c on any argument string (a USDT note's
 * comes from whatever binary the configuration names as the interpreter):
 * every argument index, and each location it gives stays inside what the
 * BPF side reads (a register slot of struct pt_regs, a size of 1-8 bytes). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../bpf/trace.h"
#include "usdtarg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	for (int i = 0; i < 14; i++) {
		const char *why = NULL;
		uint32_t w = 0;

		if (usdtarg_loc(s, i, &w, &why) == 0) {
			if (!(w & USDT_LOC_VALID) || ((w >> USDT_LOC_REG_SHIFT) & 0xff) > 160 ||
			    ((w >> USDT_LOC_REG_SHIFT) & 7))
				abort();
		} else if (!why) {
			abort();
		}
	}
	free(s);
	return 0;
}
