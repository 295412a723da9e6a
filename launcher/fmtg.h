/* fmtg: a double as printf's "%.*g" writes it, byte for byte, in a tenth
 * of the time where it can.
 *
 * The timeline holds ~7500 real numbers (times in ms); glibc's printf
 * converts each with multi-precision arithmetic, ~0.4 us a number, 3 ms of
 * the ~35 ms between the service's exit and tts-launch's. Here the
 * numbers that %g writes without an exponent (10^-4 <= |v| < 10^prec) are
 * converted exactly with 128-bit integers: v = m 2^q is scaled by 10^k as
 * m 5^k 2^(q+k), rounded to prec significant digits half to even (printf's
 * rounding in the default mode), trailing zeros dropped as %g does. The
 * rest goes to snprintf. tests/unit/test_fmtg.c compares the two on
 * millions of values. */
#ifndef TTS_FMTG_H
#define TTS_FMTG_H

#include <stddef.h>

/* snprintf(buf, size, "%.*g", prec, v) for prec 1..17 (others: as given to
 * snprintf), and its return value; buf of at least 32 bytes always holds
 * the whole number */
int fmt_g(char *buf, size_t size, int prec, double v);

#endif
