/* fmtg: fmt_g writes what snprintf's "%.*g" writes, byte for byte, for
 * every precision 1..17: random bit patterns, numbers with few decimals
 * (as the timeline's times in ms), exact ties of the rounding, both sides
 * of every power of ten and of each rounding boundary, and the values the
 * fast path leaves to snprintf (exponents, zero, infinities). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fmtg.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static long checked;

static void same(double v, int prec)
{
	char want[64], got[64];
	int nw = snprintf(want, sizeof(want), "%.*g", prec, v);
	int ng = fmt_g(got, sizeof(got), prec, v);

	if (nw != ng || strcmp(want, got)) {
		print_error("%%.%dg of %a: printf \"%s\", fmt_g \"%s\"\n", prec, v, want, got);
		fail();
	}
	checked++;
}

static void all_precisions(double v)
{
	for (int p = 1; p <= 17; p++) {
		same(v, p);
		same(-v, p);
	}
}

static void test_random_bits(void **state)
{
	(void)state;
	for (int i = 0; i < 200000; i++) {
		uint64_t b = next();
		double v;

		/* exponents around the fast path's range: 2^-20 .. 2^60 */
		b = (b & 0x800FFFFFFFFFFFFFULL) | ((uint64_t)(1023 - 20 + (next() % 81)) << 52);
		memcpy(&v, &b, sizeof(v));
		same(v, 1 + (int)(next() % 17));
		same(v, 15);
		same(v, 17);
	}
}

static void test_few_decimals(void **state)
{
	(void)state;
	/* k / 10^d: what times in ms to the us or ns look like */
	for (int i = 0; i < 200000; i++) {
		double v = (double)(next() % 100000000000ULL) / pow(10, (double)(next() % 10));

		same(v, 15);
		same(v, 17);
		same(v, 12);
		same(v, 1 + (int)(next() % 17));
	}
}

static void test_ties_and_boundaries(void **state)
{
	(void)state;
	/* exact binary ties: (2n+1) / 2^j has a 5 as its last decimal */
	for (int j = 1; j <= 30; j++)
		for (int n = 0; n < 400; n++)
			all_precisions(ldexp(2.0 * n + 1, -j));
	for (int n = 1; n < 5000; n++)
		all_precisions(n + 0.5);
	/* around powers of ten and around x.5 and x.95 at every scale */
	for (int e = -6; e <= 19; e++) {
		double p = pow(10, e),
		       c[] = {p, 9.5 * p, 9.95 * p, 9.999999999999999 * p, 5 * p, 1.5 * p, 2.5 * p};

		for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
			double v = c[i];

			for (int s = 0; s < 4; s++)
				v = nextafter(v, 0);
			for (int s = 0; s < 9; s++, v = nextafter(v, INFINITY))
				all_precisions(v);
		}
	}
}

static void test_left_to_printf(void **state)
{
	(void)state;
	double vs[] = {0.0,
		       -0.0,
		       INFINITY,
		       -INFINITY,
		       NAN,
		       1e-5,
		       9.99e-5,
		       1e17,
		       1e300,
		       5e-324,
		       2.2250738585072014e-308,
		       123456789012345678.0};

	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++)
		all_precisions(vs[i]);
	for (int p = 0; p <= 20; p++)
		same(3.14159, p); /* precisions outside 1..17 included */
	print_message("%ld values compared\n", checked);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_bits),
	    cmocka_unit_test(test_few_decimals),
	    cmocka_unit_test(test_ties_and_boundaries),
	    cmocka_unit_test(test_left_to_printf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
