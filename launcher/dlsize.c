/* dlsize: the expected size of a download and how it is said (dlsize.h). */
#include "dlsize.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

struct dlsize dlsize_expected(const struct dlsize_in *in)
{
	struct dlsize r = {DLSIZE_NONE, 0, false};
	/* what the file is at least: what it holds, and its highest offset */
	double floor = in->isize > in->have ? in->isize : in->have;

	if (in->renamed) {
		/* done: its size, from the kernel; a known size of another
		 * size was wrong for this file (a newer revision, the
		 * simulator's scaled-down models). Without the kernel's size
		 * (no write seen), no estimate is said of a finished file. */
		if (in->isize > 0) {
			r.from = DLSIZE_KERNEL;
			r.size = in->isize;
		}
		r.known_dropped = in->known > 0 && floor > 0 && in->known != floor;
		return r;
	}
	if (in->known > 0 && floor <= in->known) {
		r.from = DLSIZE_KNOWN;
		r.size = in->known;
		return r;
	}
	r.known_dropped = in->known > 0;
	if (in->isize > in->have) {
		/* written at offsets (Xet's threads): the file is at least
		 * this big, its end may not be written yet */
		r.from = DLSIZE_AT_LEAST;
		r.size = in->isize;
	}
	return r;
}

const char *dlsize_from_name(enum dlsize_from f)
{
	switch (f) {
	case DLSIZE_KERNEL:
		return "kernel";
	case DLSIZE_KNOWN:
		return "known";
	case DLSIZE_AT_LEAST:
		return "highest_offset";
	default:
		return NULL;
	}
}

enum dlsize_from dlsize_from_parse(const char *s)
{
	if (!s)
		return DLSIZE_NONE;
	if (!strcmp(s, "kernel"))
		return DLSIZE_KERNEL;
	if (!strcmp(s, "known"))
		return DLSIZE_KNOWN;
	if (!strcmp(s, "highest_offset"))
		return DLSIZE_AT_LEAST;
	return DLSIZE_NONE;
}

double dlsize_percent(double have, double size, enum dlsize_from from)
{
	if (size <= 0 || (from != DLSIZE_KERNEL && from != DLSIZE_KNOWN))
		return -1;
	return have >= size ? 100 : 100 * have / size;
}

void dlsize_text(double have, double size, enum dlsize_from from, double rate, char *out,
		 size_t len)
{
	char of[32], eta[48] = "";
	double pct = dlsize_percent(have, size, from);

	out[0] = 0;
	if (size <= 0 || from == DLSIZE_NONE)
		return;
	fmt_bytes(of, sizeof(of), size);
	if (from == DLSIZE_AT_LEAST) {
		snprintf(out, len, ", of at least %s so far", of);
		return;
	}
	if (pct < 0)
		return;
	if (rate > 0 && size > have) {
		double s = (size - have) / rate;

		if (s < 120)
			snprintf(eta, sizeof(eta), ", %.0f s left", s);
		else
			snprintf(eta, sizeof(eta), ", %.0f min left", s / 60);
	}
	snprintf(out, len, ", %.0f%% of %s%s%s%s", pct, from == DLSIZE_KNOWN ? "about " : "", of,
		 from == DLSIZE_KNOWN ? " (known size)" : "", eta);
}
