/* fmtg: see fmtg.h. */
#include "fmtg.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

static const uint64_t pow10_u64[] = {1ULL,
				     10ULL,
				     100ULL,
				     1000ULL,
				     10000ULL,
				     100000ULL,
				     1000000ULL,
				     10000000ULL,
				     100000000ULL,
				     1000000000ULL,
				     10000000000ULL,
				     100000000000ULL,
				     1000000000000ULL,
				     10000000000000ULL,
				     100000000000000ULL,
				     1000000000000000ULL,
				     10000000000000000ULL,
				     100000000000000000ULL};

/* |v|'s prec significant digits, rounded half to even, into *digits, and
 * its decimal exponent into *e; false where the fast path does not apply */
static bool digits_of(double a, int prec, uint64_t *digits, int *e)
{
	uint64_t lo = pow10_u64[prec - 1], hi = pow10_u64[prec];
	int ex, q, guess;
	double f = frexp(a, &ex);
	uint64_t m = (uint64_t)ldexp(f, 53); /* exact: a = m 2^q */

	q = ex - 53;
	guess = (int)floor(log10(a));
	for (int tries = 0; tries < 3; tries++) {
		int k = prec - 1 - guess, t;
		u128 x, integer, rest = 0, half = 0;

		/* k in 0..prec+3 for 10^-4 <= a < 10^prec: 5^k < 2^48 */
		if (guess < -5 || k < 0 || k > 21)
			return false;
		x = (u128)m;
		for (int i = 0; i < k; i++)
			x *= 5;
		t = q + k;
		if (t >= 0) {
			if (t > 60)
				return false;
			integer = x << t;
		} else {
			int s = -t;

			if (s >= 127)
				return false;
			integer = x >> s;
			rest = x & (((u128)1 << s) - 1);
			half = (u128)1 << (s - 1);
		}
		if (integer < lo) {
			guess--;
			continue;
		}
		if (integer >= hi) {
			guess++;
			continue;
		}
		if (rest > half || (rest == half && half && (integer & 1)))
			integer++;
		if (integer == hi) {
			integer = lo;
			guess++;
		}
		*digits = (uint64_t)integer;
		*e = guess;
		return true;
	}
	return false;
}

int fmt_g(char *buf, size_t size, int prec, double v)
{
	char d[20];
	uint64_t digits;
	int e, n = 0, last;

	if (prec < 1 || prec > 17 || !isfinite(v) || v == 0 || size < 32 ||
	    !digits_of(fabs(v), prec, &digits, &e) || e < -4 || e >= prec)
		return snprintf(buf, size, "%.*g", prec, v);
	for (int i = prec - 1; i >= 0; i--, digits /= 10)
		d[i] = (char)('0' + digits % 10);
	/* the last significant digit: %g drops the fraction's trailing zeros */
	last = prec - 1;
	while (last > (e >= 0 ? e : -1) && d[last] == '0')
		last--;
	/* at most a sign, "0.000", 17 digits and a point: under 32 bytes */
	if (v < 0)
		buf[n++] = '-';
	if (e >= 0) {
		memcpy(buf + n, d, (size_t)e + 1);
		n += e + 1;
		if (last > e) {
			buf[n++] = '.';
			memcpy(buf + n, d + e + 1, (size_t)(last - e));
			n += last - e;
		}
	} else {
		buf[n++] = '0';
		buf[n++] = '.';
		for (int i = 0; i < -e - 1; i++)
			buf[n++] = '0';
		memcpy(buf + n, d, (size_t)last + 1);
		n += last + 1;
	}
	buf[n] = '\0';
	return n;
}
