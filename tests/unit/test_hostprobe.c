/* hostprobe: the kernel and filesystem facts doctor, the tracer and the
 * model's host section use. Checked against what this test reads itself. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmocka.h>

#include "hfcache.h"
#include "hostprobe.h"

static void test_kernel_id_matches_uname_and_btf(void **state)
{
	struct utsname u;
	struct stat st;
	char id[1024], want[1024];

	(void)state;
	if (hostprobe_btf()) {
		assert_int_equal(hostprobe_kernel_id(id, sizeof(id)), -1);
		skip();
	}
	assert_int_equal(uname(&u), 0);
	assert_int_equal(stat(HOSTPROBE_BTF, &st), 0);
	snprintf(want, sizeof(want), "%s|%s|%lld", u.release, u.version, (long long)st.st_size);
	assert_int_equal(hostprobe_kernel_id(id, sizeof(id)), 0);
	assert_string_equal(id, want);
}

static void test_lockdown_mode_parsed(void **state)
{
	char line[256], buf[256];
	const char *mode;

	(void)state;
	if (hostprobe_lockdown_line(line, sizeof(line))) {
		assert_null(hostprobe_lockdown(buf, sizeof(buf)));
		skip();
	}
	mode = hostprobe_lockdown(buf, sizeof(buf));
	if (strstr(line, "[none]"))
		assert_null(mode);
	else
		assert_non_null(mode);
}

static unsigned long long cap_eff(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long v = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void test_caps_and_limits(void **state)
{
	struct rlimit r;
	char v[32];

	(void)state;
	/* the effective set as /proc says it */
	assert_true(hostprobe_has_cap(CAP_SYS_ADMIN) == ((cap_eff() >> CAP_SYS_ADMIN) & 1));
	assert_true(hostprobe_has_cap(CAP_BPF) == ((cap_eff() >> CAP_BPF) & 1));
	assert_int_equal(hostprobe_memlock(&r), 0);
	assert_true(r.rlim_cur <= r.rlim_max);
	if (hostprobe_unpriv_bpf(v, sizeof(v)) == 0)
		assert_true(v[0] >= '0' && v[0] <= '2' && !strchr(v, '\n'));
}

static void test_fs_nearest_ancestor(void **state)
{
	struct hostprobe_fs fs;

	(void)state;
	assert_int_equal(hostprobe_fs("/proc", &fs), 0);
	assert_true(fs.exists);
	assert_string_equal(fs.statfs_path, "/proc");
	assert_true(fs.magic == 0x9fa0); /* PROC_SUPER_MAGIC */
	/* not created yet: the filesystem it would be created on */
	assert_int_equal(hostprobe_fs("/tmp/hostprobe-none/a/b", &fs), 0);
	assert_false(fs.exists);
	assert_string_equal(fs.statfs_path, "/tmp");
}

static void test_host_json(void **state)
{
	json_t *h = hostprobe_host_json();
	struct utsname u;

	(void)state;
	assert_non_null(h);
	assert_int_equal(uname(&u), 0);
	assert_string_equal(json_string_value(json_object_get(h, "kernel")), u.release);
	assert_true(json_is_boolean(json_object_get(h, "btf")));
	assert_true(json_is_true(json_object_get(h, "btf")) == (hostprobe_btf() == 0));
	assert_int_equal(json_integer_value(json_object_get(h, "uid")), (int)geteuid());
	assert_true(json_is_array(json_object_get(h, "capabilities")));
	json_decref(h);
}

/* cache_fs: each cache's file system, and the traced *.incomplete files on
 * disk under it now (relative ones resolved against the app dir; one under
 * an earlier cache counted there only; a finished or vanished one not) */
static void test_cache_fs(void **state)
{
	char tmp[] = "/tmp/hostprobe-cachefs-XXXXXX", a[512], b[512], cmd[1200];
	struct hf_cache_dir dirs[2];
	const char *paths[5];
	json_t *l, *inc;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	snprintf(a, sizeof(a), "%s/hub/models--o--r/blobs/aa.incomplete", tmp);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/hub/models--o--r/blobs", tmp);
	assert_int_equal(system(cmd), 0);
	f = fopen(a, "w");
	assert_non_null(f);
	fputs("12345", f);
	fclose(f);
	snprintf(b, sizeof(b), "%s/hub/models--o--r/blobs/gone.incomplete", tmp);
	snprintf(dirs[0].path, sizeof(dirs[0].path), "%s/hub", tmp);
	dirs[0].role = "HF_HUB_CACHE";
	snprintf(dirs[1].path, sizeof(dirs[1].path), "%s", tmp);
	dirs[1].role = "model_dir/hf_cache";
	paths[0] = "hub/models--o--r/blobs/aa.incomplete"; /* relative to the app dir */
	paths[1] = b;
	paths[2] = "[fd] aa.incomplete";
	paths[3] = NULL;
	paths[4] = "/etc/passwd";
	l = hostprobe_cache_fs(dirs, 2, tmp, paths, 5);
	assert_non_null(l);
	assert_int_equal(json_array_size(l), 2);
	assert_true(json_is_true(json_object_get(json_array_get(l, 0), "exists")));
	inc = json_object_get(json_array_get(l, 0), "incomplete");
	assert_int_equal(json_array_size(inc), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(inc, 0), "path")), a);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(inc, 0), "size")), 5);
	/* under the first cache: not again under the second */
	assert_int_equal(json_array_size(json_object_get(json_array_get(l, 1), "incomplete")), 0);
	json_decref(l);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kernel_id_matches_uname_and_btf),
	    cmocka_unit_test(test_lockdown_mode_parsed),
	    cmocka_unit_test(test_caps_and_limits),
	    cmocka_unit_test(test_fs_nearest_ancestor),
	    cmocka_unit_test(test_host_json),
	    cmocka_unit_test(test_cache_fs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
