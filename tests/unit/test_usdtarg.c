/* test_usdtarg: launcher/usdtarg.c on the argument strings SystemTap's
 * sys/sdt.h writes on x86-64 (CPython's import probes among them), each
 * kind of operand, and strings it cannot read: a location word the BPF side
 * reads right, or a refusal with a reason, never a wrong location. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../bpf/trace.h"
#include "usdtarg.h"

static uint32_t reg_of(uint32_t w) { return (w >> USDT_LOC_REG_SHIFT) & 0xff; }
static int bytes_of(uint32_t w) { return 1 << ((w >> USDT_LOC_SIZE_SHIFT) & 3); }
static int16_t off_of(uint32_t w) { return (int16_t)(w & USDT_LOC_OFF_MASK); }

static void test_cpython_import_probes(void **state)
{
	const char *why = NULL;
	uint32_t w;

	(void)state;
	/* import__find__load__start(name): a pointer in %rax */
	assert_int_equal(usdtarg_loc("8@%rax", 0, &w, &why), 0);
	assert_true(w & USDT_LOC_VALID);
	assert_int_equal(reg_of(w), 80); /* pt_regs.ax */
	assert_int_equal(bytes_of(w), 8);
	assert_false(w & (USDT_LOC_SIGNED | USDT_LOC_DEREF));
	/* import__find__load__done(name, found): found a signed int in %edx */
	assert_int_equal(usdtarg_loc("8@%rax -4@%edx", 1, &w, &why), 0);
	assert_int_equal(reg_of(w), 96); /* pt_regs.dx */
	assert_int_equal(bytes_of(w), 4);
	assert_true(w & USDT_LOC_SIGNED);
	assert_false(w & USDT_LOC_DEREF);
	assert_int_equal(usdtarg_loc("8@%rax -4@%edx", 2, &w, &why), -1);
	assert_string_equal(why, "no such argument");
}

static void test_registers_by_every_width(void **state)
{
	static const struct {
		const char *arg;
		uint32_t reg;
		int bytes;
	} cases[] = {
	    {"8@%r15", 0, 8},  {"4@%r14d", 8, 4},  {"2@%r13w", 16, 2}, {"1@%r12b", 24, 1},
	    {"8@%rbp", 32, 8}, {"4@%ebx", 40, 4},  {"8@%r11", 48, 8},  {"8@%r10", 56, 8},
	    {"8@%r9", 64, 8},  {"8@%r8", 72, 8},   {"1@%al", 80, 1},   {"2@%cx", 88, 2},
	    {"8@%rdx", 96, 8}, {"1@%sil", 104, 1}, {"4@%edi", 112, 4}, {"8@%rsp", 152, 8},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = NULL;
		uint32_t w = 0;

		assert_int_equal(usdtarg_loc(cases[i].arg, 0, &w, &why), 0);
		assert_int_equal(reg_of(w), cases[i].reg);
		assert_int_equal(bytes_of(w), cases[i].bytes);
	}
}

static void test_memory_operands(void **state)
{
	const char *why = NULL;
	uint32_t w;

	(void)state;
	assert_int_equal(usdtarg_loc("-4@-20(%rbp) 8@8(%rsp)", 0, &w, &why), 0);
	assert_true(w & USDT_LOC_DEREF && w & USDT_LOC_SIGNED);
	assert_int_equal(reg_of(w), 32);
	assert_int_equal(off_of(w), -20);
	assert_int_equal(bytes_of(w), 4);
	assert_int_equal(usdtarg_loc("-4@-20(%rbp) 8@8(%rsp)", 1, &w, &why), 0);
	assert_int_equal(reg_of(w), 152);
	assert_int_equal(off_of(w), 8);
	assert_int_equal(usdtarg_loc("8@(%rdi)", 0, &w, &why), 0); /* no offset: 0 */
	assert_true(w & USDT_LOC_DEREF);
	assert_int_equal(reg_of(w), 112);
	assert_int_equal(off_of(w), 0);
	assert_int_equal(usdtarg_loc("8@32767(%rdi)", 0, &w, &why), 0);
	assert_int_equal(off_of(w), 32767);
	assert_int_equal(usdtarg_loc("8@32768(%rdi)", 0, &w, &why), -1);
	assert_string_equal(why, "a memory offset beyond 16 bits");
	assert_int_equal(usdtarg_loc("8@16(%rax,%rbx,8)", 0, &w, &why), -1);
	assert_string_equal(why, "an indexed memory operand");
}

static void test_refused_with_a_reason(void **state)
{
	static const char *bad[] = {
	    "-4@$5",	   /* a constant */
	    "8@%xmm0",	   /* a register pt_regs does not hold */
	    "3@%rax",	   /* a size sdt.h never writes */
	    "8%rax",	   /* no @ */
	    "@%rax",	   /* no size */
	    "8@",	   /* no operand */
	    "8@foo(%rip)", /* a symbol */
	    "8@-8(%rbp",   /* unclosed */
	    "",
	    "   ",
	};
	uint32_t w = 0xdeadbeef;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		assert_int_equal(usdtarg_loc(bad[i], 0, &w, &why), -1);
		assert_non_null(why);
		assert_int_equal(w, 0xdeadbeef); /* untouched */
	}
	assert_int_equal(usdtarg_loc(NULL, 0, &w, NULL), -1);
	/* extra spaces between arguments are not arguments */
	assert_int_equal(usdtarg_loc("  8@%rax   -4@%edx ", 1, &w, NULL), 0);
	assert_int_equal(reg_of(w), 96);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpython_import_probes),
	    cmocka_unit_test(test_registers_by_every_width),
	    cmocka_unit_test(test_memory_operands),
	    cmocka_unit_test(test_refused_with_a_reason),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
