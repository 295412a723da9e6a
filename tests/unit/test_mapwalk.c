/* mapwalk: a walk gives every entry of a hash or LRU map once, with its
 * value, whether it reads batches (growing its buffers when one bucket
 * does not fit) or goes entry by entry. Needs BPF maps: root (CI runs as
 * root; elsewhere skipped when not root, failed when CI is set). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/bpf.h>

#include "mapwalk.h"

#define N 5000

struct key {
	uint64_t id;
	char name[40]; /* a path-like key, as the paths map's */
};

struct val {
	uint64_t twice;
	uint32_t id;
	uint32_t pad;
};

static int make_map(enum bpf_map_type type, int entries)
{
	LIBBPF_OPTS(bpf_map_create_opts, o);
	int fd;

	if (type == BPF_MAP_TYPE_HASH)
		o.map_flags = BPF_F_NO_PREALLOC;
	fd = bpf_map_create(type, "mapwalk_test", sizeof(struct key), sizeof(struct val),
			    (uint32_t)entries, &o);
	if (fd < 0) {
		if (getenv("CI"))
			fail_msg("no BPF map (%s): CI runs as root on a kernel with BPF",
				 strerror(errno));
		skip();
	}
	for (int i = 0; i < entries; i++) {
		struct key k = {.id = (uint64_t)i * 7919};
		struct val v = {.twice = (uint64_t)i * 2, .id = (uint32_t)i};

		snprintf(k.name, sizeof(k.name), "/usr/lib/python3/%d.py", i);
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST), 0);
	}
	return fd;
}

/* walks fd, asserting each entry is one of the map's, seen once */
static void walk_all(int fd, int entries, bool by_entry, unsigned cap)
{
	unsigned char *seen = calloc((size_t)entries, 1);
	struct map_walk w;
	struct key k;
	struct val v;
	int n = 0;

	assert_non_null(seen);
	assert_int_equal(map_walk_begin(&w, fd, sizeof(struct key), sizeof(struct val), by_entry),
			 0);
	if (cap)
		w.cap = cap; /* buffers allocated bigger; grown from here */
	while (map_walk_next(&w, &k, &v)) {
		char name[40];

		assert_true(v.id < (uint32_t)entries);
		assert_int_equal(k.id, (uint64_t)v.id * 7919);
		assert_int_equal(v.twice, (uint64_t)v.id * 2);
		snprintf(name, sizeof(name), "/usr/lib/python3/%u.py", v.id);
		assert_string_equal(k.name, name);
		assert_int_equal(seen[v.id], 0);
		seen[v.id] = 1;
		n++;
	}
	assert_false(w.failed);
	assert_int_equal(w.by_entry, by_entry);
	if (cap)
		assert_true(w.cap > cap); /* a bucket of two did not fit one */
	map_walk_end(&w);
	/* every entry the map holds (an LRU map may have evicted some as
	 * they went in) */
	for (int i = 0; i < entries; i++) {
		k = (struct key){.id = (uint64_t)i * 7919};
		snprintf(k.name, sizeof(k.name), "/usr/lib/python3/%d.py", i);
		if (!bpf_map_lookup_elem(fd, &k, &v))
			assert_int_equal(seen[i], 1);
		else
			assert_int_equal(seen[i], 0);
	}
	assert_true(n > entries / 2);
	free(seen);
}

static void test_batches_give_every_entry_once(void **state)
{
	int fd = make_map(BPF_MAP_TYPE_HASH, N);

	(void)state;
	walk_all(fd, N, false, 0);
	walk_all(fd, N, true, 0);
	close(fd);
	fd = make_map(BPF_MAP_TYPE_LRU_HASH, N);
	walk_all(fd, N, false, 0);
	close(fd);
}

static void test_a_bucket_bigger_than_the_buffer(void **state)
{
	int fd = make_map(BPF_MAP_TYPE_HASH, N);

	(void)state;
	walk_all(fd, N, false, 1);
	close(fd);
}

static void test_empty_map(void **state)
{
	int fd = make_map(BPF_MAP_TYPE_HASH, 0 + 1);
	struct key k = {.id = 0};
	struct map_walk w;
	struct val v;

	(void)state;
	snprintf(k.name, sizeof(k.name), "/usr/lib/python3/0.py");
	assert_int_equal(bpf_map_delete_elem(fd, &k), 0);
	for (int by_entry = 0; by_entry < 2; by_entry++) {
		assert_int_equal(map_walk_begin(&w, fd, sizeof(k), sizeof(struct val), by_entry),
				 0);
		assert_false(map_walk_next(&w, &k, &v));
		assert_false(w.failed);
		map_walk_end(&w);
	}
	close(fd);
}

/* sizes other than the map's: refused, not a kernel write past a buffer */
static void test_other_sizes_refused(void **state)
{
	int fd = make_map(BPF_MAP_TYPE_HASH, 16);
	struct map_walk w;
	char k[sizeof(struct key)], v[sizeof(struct val)];

	(void)state;
	assert_int_equal(map_walk_begin(&w, fd, sizeof(struct key) - 8, sizeof(struct val), false),
			 -1);
	assert_false(map_walk_next(&w, k, v));
	assert_true(w.failed);
	map_walk_end(&w);
	assert_int_equal(map_walk_begin(&w, fd, sizeof(struct key), sizeof(struct val) - 8, true),
			 -1);
	assert_false(map_walk_next(&w, k, v));
	map_walk_end(&w);
	close(fd);
}

/* A map type without a batch read (a device hash map: the kernel answers
 * the batch command with ENOTSUPP): the first read fails, nothing was
 * given yet, so the walk goes entry by entry from the first, each entry
 * once. The values: the loopback's ifindex. */
static void test_no_batch_read_goes_entry_by_entry(void **state)
{
	unsigned char seen[300] = {0};
	struct map_walk w;
	uint32_t k, v = 1; /* lo */
	int fd, n = 0;

	(void)state;
	fd = bpf_map_create(BPF_MAP_TYPE_DEVMAP_HASH, "mapwalk_dev", sizeof(k), sizeof(v), 300,
			    NULL);
	if (fd < 0) {
		if (getenv("CI"))
			fail_msg("no device hash map (%s): CI runs as root on a kernel with BPF",
				 strerror(errno));
		skip();
	}
	for (uint32_t i = 0; i < 300; i++) {
		k = i * 40503u;
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST), 0);
	}
	assert_int_equal(map_walk_begin(&w, fd, sizeof(k), sizeof(v), false), 0);
	while (map_walk_next(&w, &k, &v)) {
		uint32_t i = k / 40503u;

		assert_int_equal(k % 40503u, 0);
		assert_true(i < 300);
		assert_int_equal(v, 1);
		assert_int_equal(seen[i], 0);
		seen[i] = 1;
		n++;
	}
	assert_false(w.failed);
	assert_true(w.by_entry); /* switched: not asked for (force_entry false) */
	assert_int_equal(n, 300);
	map_walk_end(&w);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batches_give_every_entry_once),
	    cmocka_unit_test(test_a_bucket_bigger_than_the_buffer),
	    cmocka_unit_test(test_empty_map),
	    cmocka_unit_test(test_other_sizes_refused),
	    cmocka_unit_test(test_no_batch_read_goes_entry_by_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
