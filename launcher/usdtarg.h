/* usdtarg: where a USDT probe's argument lies, from the argument string of
 * its SystemTap note (x86-64: "8@%rax -4@%edx", "8@-16(%rbp)", "-4@$5"),
 * as the cookie word python.bpf.c reads (USDT_LOC_* in bpf/trace.h). Pure:
 * no I/O, so that the unit tests and the fuzzer can feed it anything. */
#ifndef TTS_USDTARG_H
#define TTS_USDTARG_H

#include <stdint.h>

/* The i-th (from 0) argument of args as a USDT_LOC_* word: 0 and the
 * location word in *loc, or -1 when args has no such argument or it is one
 * the BPF side cannot read (a constant, a register it does not know, an
 * offset beyond 16 bits, an index register): the reason in why. */
int usdtarg_loc(const char *args, int i, uint32_t *loc, const char **why);

#endif
