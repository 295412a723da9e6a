/* heapreserve: after the reserve, a buffer of MiB (which glibc would map
 * fresh, a fault a page) comes from pages the reserve touched: its writes
 * fault no page. Before the reserve, the same buffer faults every page
 * (the measure works). A sanitizer's allocator takes no mallopt: there the
 * reserve does nothing and says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "heapreserve.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

#define BUF (3u << 19) /* 1.5 MiB: over glibc's default mmap threshold */

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* faults taken by writing one byte a page of a new BUF-sized buffer */
static long faults_of_a_buffer(void)
{
	long pg = sysconf(_SC_PAGESIZE), before;
	char *p;

	before = minor_faults();
	p = malloc(BUF);
	assert_non_null(p);
	for (size_t i = 0; i < BUF; i += (size_t)pg)
		((volatile char *)p)[i] = 1;
	free(p);
	return minor_faults() - before;
}

static void test_sizes_refused(void **state)
{
	(void)state;
	assert_int_equal(heap_reserve(0), 0);
	assert_int_equal(heap_reserve(9u << 20), 0);
}

/* one test: the reserve changes the process's allocator for good */
static void test_buffers_after_the_reserve_fault_nothing(void **state)
{
	long pg = sysconf(_SC_PAGESIZE);
	long fresh = faults_of_a_buffer(); /* the measure: a new buffer faults */
	size_t pages = heap_reserve(2u << 20);

	(void)state;
#ifdef SANITIZED
	(void)fresh;
	(void)pg;
	assert_int_equal(pages, 0); /* its allocator takes no mallopt */
#else
	assert_true(fresh >= (long)BUF / pg * 9 / 10);
	assert_true(pages >= (2u << 20) / (size_t)pg - 1);
	/* twice: a freed buffer's pages stay in the heap too */
	assert_true(faults_of_a_buffer() <= 4);
	assert_true(faults_of_a_buffer() <= 4);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes_refused),
	    cmocka_unit_test(test_buffers_after_the_reserve_fault_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
