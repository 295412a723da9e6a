/* tracer_load: a program the kernel's verifier rejected is named, with the
 * log's verdict, from the warning libbpf prints (a load on a kernel the
 * build does not fit said "not permitted to load BPF programs" as root:
 * 6.18.44's "combined stack size of 2 calls is 528"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "tracer_load.h"

/* libbpf 1.1's warning for a rejected program, as its print callback gets it */
static const char rejected_log[] =
    "libbpf: prog 'sys_exit': BPF program load failed: Permission denied\n"
    "libbpf: prog 'sys_exit': -- BEGIN PROG LOAD LOG --\n"
    "Func#13 ('sx_other') is safe for any args that match its prototype\n"
    "combined stack size of 2 calls is 528. Too large\n"
    "processed 19360 insns (limit 1000000) max_states_per_insn 6 total_states 1259 "
    "peak_states 956 mark_read 0\n"
    "-- END PROG LOAD LOG --\n";

static void test_nothing_noted_without_a_log(void **state)
{
	char why[512] = "";

	(void)state;
	tracer_load_note("libbpf: failed to load object 'trace_bpf'\n");
	tracer_load_note("libbpf: prog 'x': failed to attach: Device or resource busy\n");
	assert_false(tracer_load_rejection(why, sizeof(why)));
	assert_string_equal(why, "");
}

static void test_the_program_and_the_verdict(void **state)
{
	char why[512];

	(void)state;
	tracer_load_note(rejected_log);
	assert_true(tracer_load_rejection(why, sizeof(why)));
	assert_non_null(strstr(why, "rejected program 'sys_exit'"));
	assert_non_null(strstr(why, "(combined stack size of 2 calls is 528. Too large)"));
	assert_null(strstr(why, "processed"));
	assert_non_null(strstr(why, "tts-launch run -v"));
}

static void test_a_log_with_only_statistics(void **state)
{
	char why[512];

	(void)state;
	tracer_load_note("libbpf: prog 'gai_exit': -- BEGIN PROG LOAD LOG --\n"
			 "processed 1 insns\n-- END PROG LOAD LOG --\n");
	assert_true(tracer_load_rejection(why, sizeof(why)));
	assert_non_null(strstr(why, "'gai_exit' (its log: tts-launch run -v)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nothing_noted_without_a_log),
	    cmocka_unit_test(test_the_program_and_the_verdict),
	    cmocka_unit_test(test_a_log_with_only_statistics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
