/* envcheck: a misspelled Hugging Face / IndexTTS2 variable gets the nearest
 * known name; known names and an app's own variables get nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "envcheck.h"

static void test_typos_get_the_nearest_name(void **state)
{
	(void)state;
	assert_string_equal(envcheck_suggest("HF_HUB_CAHCE"), "HF_HUB_CACHE"); /* swap */
	assert_string_equal(envcheck_suggest("HF_HUB_CACH"), "HF_HUB_CACHE");  /* missing */
	assert_string_equal(envcheck_suggest("HF_ENDPOIN"), "HF_ENDPOINT");
	assert_string_equal(envcheck_suggest("HF_HUB_OFLINE"), "HF_HUB_OFFLINE");
	assert_string_equal(envcheck_suggest("HF_HUB_ETAG_TIMEOUTS"), "HF_HUB_ETAG_TIMEOUT");
	assert_string_equal(envcheck_suggest("hf_home"), "HF_HOME"); /* case */
	assert_string_equal(envcheck_suggest("HF_HOEM"), "HF_HOME");
	assert_string_equal(envcheck_suggest("USE_MODELSCOP"), "USE_MODELSCOPE");
}

static void test_known_and_unrelated_names_are_quiet(void **state)
{
	(void)state;
	assert_null(envcheck_suggest("HF_HUB_CACHE"));
	assert_null(envcheck_suggest("HF_HOME"));
	assert_null(envcheck_suggest("CUDA_VISIBLE_DEVICES"));
	assert_null(envcheck_suggest("MY_APP_SETTING"));
	assert_null(envcheck_suggest("LANG"));
	assert_null(envcheck_suggest("SIM_GENERATION"));
	assert_null(envcheck_suggest("HOME")); /* not HF_HOME: too far for a short name */
	assert_null(envcheck_suggest(""));
	assert_null(envcheck_suggest(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_typos_get_the_nearest_name),
	    cmocka_unit_test(test_known_and_unrelated_names_are_quiet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
