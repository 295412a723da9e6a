/* attribution: the exclusive breakdown over hand-made interval streams:
 * every microsecond in one cause, the causes summing to the window, waits
 * on another thread or process followed one hop, overlaps not counted
 * twice, and the classification of the kernel's records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "attrib_native.h"
#include "attribution.h"

static struct attr_proc procs1[] = {{10, 1, 0, -1, "python3", false}};

static struct attr_off off(int pid, int tid, double a, double b, double wake, enum attr_kind k,
			   const char *what)
{
	struct attr_off o = {.start = a, .end = b, .wake = wake, .pid = pid, .tid = tid, .kind = k};

	snprintf(o.what, sizeof(o.what), "%s", what);
	return o;
}

static long long us_of(const struct attr_result *r, enum attr_kind k, const char *what)
{
	for (size_t i = 0; i < r->n_causes; i++)
		if (r->causes[i].kind == k && (!what || !strcmp(r->causes[i].what, what)))
			return r->causes[i].us;
	return -1;
}

static long long kind_us(const struct attr_result *r, enum attr_kind k)
{
	long long s = 0;

	for (size_t i = 0; i < r->n_causes; i++)
		if (r->causes[i].kind == k)
			s += r->causes[i].us;
	return s;
}

static void assert_tiles(const struct attr_result *r, long long window_us)
{
	long long s = 0;

	for (size_t i = 0; i < r->n_causes; i++) {
		assert_true(r->causes[i].us > 0);
		s += r->causes[i].us;
	}
	assert_int_equal(r->window_us, window_us);
	assert_int_equal(s, window_us);
	assert_int_equal(r->explained_us, window_us - kind_us(r, AK_OTHER));
}

static void test_no_records_is_all_cpu(void **st)
{
	struct attr_input in = {.start = 0, .end = 100, .root = 10, .procs = procs1, .n_procs = 1};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 100000);
	attr_result_free(&r);
}

static void test_wait_then_runqueue_after_wakeup(void **st)
{
	struct attr_off o[] = {off(10, 10, 10, 40, 35, AK_SLEEP, "clock_nanosleep"),
			       off(10, 10, 50, 60, -1, AK_RUNQ, "cpu contention")};
	struct attr_input in = {0, 100, 10, o, 2, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_SLEEP, "clock_nanosleep"), 25000);
	assert_int_equal(kind_us(&r, AK_RUNQ), 15000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 60000);
	assert_int_equal(r.explained_us, 100000);
	/* the strip: cpu, sleep, runqueue, cpu, runqueue, cpu, in order */
	assert_int_equal(r.n_segs, 6);
	assert_int_equal(r.segs[1].kind, AK_SLEEP);
	assert_true(r.segs[1].start == 10 && r.segs[1].end == 35);
	assert_string_equal(r.segs[1].what, "clock_nanosleep");
	assert_string_equal(r.segs[0].what, "python3");
	assert_int_equal(r.segs[2].kind, AK_RUNQ);
	assert_true(r.segs[5].end == 100);
	assert_false(r.segs_cut);
	/* largest first */
	assert_int_equal(r.causes[0].kind, AK_CPU);
	attr_result_free(&r);
}

static void test_overlaps_and_window_edges_count_once(void **st)
{
	/* a wait that began before the window, two that overlap (a record
	 * stream is never like this from one thread; it must not count twice),
	 * and one that runs past the window's end */
	struct attr_off o[] = {off(10, 10, -20, 5, -1, AK_NET, "hub:443"),
			       off(10, 10, 30, 50, -1, AK_DISK, "/m/a.bin"),
			       off(10, 10, 40, 60, -1, AK_DISK, "/m/a.bin"),
			       off(10, 10, 90, 300, -1, AK_SLEEP, "nanosleep")};
	struct attr_input in = {0, 100, 10, o, 4, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_NET, "hub:443"), 5000);
	assert_int_equal(us_of(&r, AK_DISK, "/m/a.bin"), 30000);
	assert_int_equal(us_of(&r, AK_SLEEP, NULL), 10000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 55000);
	attr_result_free(&r);
}

static void test_wait_on_another_thread_is_what_it_did(void **st)
{
	/* the main thread joins thread 11 (a futex, woken by it at 60); 11
	 * was waiting for the network from 20 to 50 */
	struct attr_off o[] = {off(10, 10, 10, 60, 60, AK_LOCK, "futex"),
			       off(10, 11, 20, 50, -1, AK_NET, "hub:443")};
	struct attr_input in = {0, 100, 10, o, 2, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	o[0].hop = HOP_WAKER;
	o[0].waker_pid = 10;
	o[0].waker_tid = 11;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_NET, "hub:443"), 30000);
	assert_int_equal(us_of(&r, AK_CPU, "python3 (thread)"), 20000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 50000);
	assert_int_equal(us_of(&r, AK_LOCK, NULL), -1);
	attr_result_free(&r);
}

static void test_wait_on_a_thread_waiting_on_a_third(void **st)
{
	/* the main thread waits for 11 (10-60), which waits for 12 (15-55),
	 * which waits for the network (20-50): the network's, three hops */
	struct attr_off o[] = {
	    off(10, 10, 10, 60, 60, AK_LOCK, "futex"), off(10, 11, 15, 55, 55, AK_LOCK, "futex"),
	    off(10, 12, 20, 50, -1, AK_NET, "cas:443"), off(10, 12, 70, 90, 90, AK_LOCK, "futex")};
	struct attr_input in = {0, 100, 10, o, 4, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	o[0].hop = o[1].hop = o[3].hop = HOP_WAKER;
	o[0].waker_pid = o[1].waker_pid = o[3].waker_pid = 10;
	o[0].waker_tid = 11;
	o[1].waker_tid = 12;
	o[3].waker_tid = 10; /* not followed back: the main thread was running */
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_NET, "cas:443"), 30000);
	assert_int_equal(us_of(&r, AK_CPU, "python3 (thread)"), 5000 + 5000 + 5000 + 5000);
	assert_int_equal(us_of(&r, AK_LOCK, NULL), -1);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 50000);
	attr_result_free(&r);
}

static void test_child_and_followed_process(void **st)
{
	/* uv (10) starts python (20) at 5, which gets ready (followed); python
	 * waits for a helper `sleep` (30) from 40 to 70 */
	struct attr_proc p[] = {{10, 1, 0, -1, "uv", false},
				{20, 10, 5, -1, "python3", true},
				{30, 20, 40, 70, "sleep", false}};
	struct attr_off o[] = {off(10, 10, 1, 200, -1, AK_CHILD, "python3"),
			       off(20, 20, 40, 70, 70, AK_CHILD, "sleep"),
			       off(20, 20, 80, 90, -1, AK_SLEEP, "nanosleep")};
	struct attr_input in = {0, 100, 10, o, 3, p, 3, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	o[0].hop = o[1].hop = HOP_PROCESS;
	o[0].waker_pid = 20;
	o[1].waker_pid = 30;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_CPU, "uv"), 1000);
	assert_int_equal(us_of(&r, AK_CHILD, "python3"), 4000); /* until python starts */
	assert_int_equal(us_of(&r, AK_CHILD, "sleep"), 30000);
	assert_int_equal(us_of(&r, AK_SLEEP, "nanosleep"), 10000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 55000);
	attr_result_free(&r);
}

static void test_cpu_inside_an_import_and_exit(void **st)
{
	struct attr_proc p[] = {{10, 1, 2, 80, "python3", false}};
	struct attr_import im[] = {{10, 10, 30, "torch"}, {11, 0, 100, "other-process"}};
	struct attr_off o[] = {off(10, 10, 20, 25, -1, AK_DISK, "/usr/lib/libtorch.so")};
	struct attr_input in = {0, 100, 10, o, 1, p, 1, im, 2, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(us_of(&r, AK_CPU, "import torch"), 15000);
	assert_int_equal(us_of(&r, AK_DISK, NULL), 5000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 58000);
	assert_int_equal(us_of(&r, AK_OTHER, "process not started"), 2000);
	assert_int_equal(us_of(&r, AK_OTHER, "process exited"), 20000);
	assert_int_equal(r.explained_us, 78000);
	attr_result_free(&r);
}

static void test_many_causes_are_capped_keeping_the_sum(void **st)
{
	struct attr_off o[200];
	struct attr_input in = {0, 1000, 10, o, 200, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;
	char what[32];

	(void)st;
	for (int i = 0; i < 200; i++) {
		snprintf(what, sizeof(what), "/f/%d", i);
		o[i] = off(10, 10, i * 5.0, i * 5.0 + 1 + i % 3, -1, AK_DISK, what);
	}
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_true(r.n_causes <= ATTR_MAX_CAUSES);
	assert_tiles(&r, 1000000);
	attr_result_free(&r);
}

/* A busy machine: thousands of short cpu and runqueue runs, then a long
 * disk wait. The strip keeps at most ATTR_MAX_SEGS runs, still tiles the
 * whole window in order and ends with the disk wait (it was cut there). */
static void test_strip_of_thousands_of_runs_keeps_its_end(void **st)
{
	enum { N = 8000 };
	struct attr_off *o = calloc(N + 1, sizeof(*o));
	struct attr_input in = {0, 1000, 10, o, N + 1, procs1, 1,    NULL,
				0, NULL, 0,  0, 0,     0,      NULL, 0};
	struct attr_result r;

	(void)st;
	assert_non_null(o);
	for (int i = 0; i < N; i++)
		o[i] = off(10, 10, i * 0.1, i * 0.1 + 0.05, -1, AK_RUNQ, "cpu contention");
	o[N] = off(10, 10, 900, 1000, -1, AK_DISK, "/cold.bin");
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 1000000);
	assert_int_equal(us_of(&r, AK_DISK, "/cold.bin"), 100000);
	assert_false(r.segs_cut);
	assert_true(r.n_segs > 1 && r.n_segs <= ATTR_MAX_SEGS);
	assert_true(r.segs[0].start == 0);
	for (size_t i = 1; i < r.n_segs; i++)
		assert_true(r.segs[i].start == r.segs[i - 1].end);
	assert_int_equal(r.segs[r.n_segs - 1].kind, AK_DISK);
	assert_string_equal(r.segs[r.n_segs - 1].what, "/cold.bin");
	assert_true(r.segs[r.n_segs - 1].start == 900 && r.segs[r.n_segs - 1].end == 1000);
	attr_result_free(&r);
	free(o);
}

static void test_samples_name_the_cpu(void **st)
{
	/* samples of burn at 20 and 40, of load at 70; preempted at 50-55 in
	 * load (the frame read at the switch-out); a sample of a module body
	 * leaves the import in progress its name, and keeps its own outside */
	struct attr_sample s[] = {{10, 20, "burn (p.py:3)", false},
				  {10, 40, "burn (p.py:3)", false},
				  {10, 70, "load (p.py:9)", false},
				  {10, 85, "<module> (json/__init__.py:1)", false},
				  {11, 30, "other thread", false}};
	struct attr_import im[] = {{10, 80, 100, "json"}};
	struct attr_off o[] = {off(10, 10, 50, 55, -1, AK_RUNQ, "cpu contention")};
	struct attr_input in = {0, 100, 10, o, 1, procs1, 1, im, 1, s, 5, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	snprintf(o[0].py, sizeof(o[0].py), "load (p.py:9)");
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	/* [0,40] up to burn's samples; [40,50] before the preemption in load */
	assert_int_equal(us_of(&r, AK_CPU, "burn (p.py:3)"), 40000);
	assert_int_equal(us_of(&r, AK_CPU, "load (p.py:9)"), 10000 + 15000);
	assert_int_equal(us_of(&r, AK_RUNQ, NULL), 5000);
	assert_int_equal(us_of(&r, AK_CPU, "import json"), 20000);
	assert_int_equal(us_of(&r, AK_CPU, "<module> (json/__init__.py:1)"), 10000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), -1);
	assert_int_equal(us_of(&r, AK_CPU, "other thread"), -1);
	attr_result_free(&r);
}

static void test_sample_during_a_syscall_keeps_the_wait(void **st)
{
	/* a sample stamped inside an off-CPU interval (taken in the syscall
	 * before it blocked, or stamped late): the wait keeps all its time,
	 * the sample names no cpu, and the cpu after the wait is the frame
	 * the thread blocked in, not the sample's */
	struct attr_sample s[] = {{10, 10, "burn (p.py:3)", false},
				  {10, 45, "nap (p.py:7)", false}};
	struct attr_off o[] = {off(10, 10, 30, 60, -1, AK_SLEEP, "clock_nanosleep")};
	struct attr_input in = {0, 100, 10, o, 1, procs1, 1, NULL, 0, s, 2, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	snprintf(o[0].py, sizeof(o[0].py), "load (p.py:9)");
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(kind_us(&r, AK_SLEEP), 30000);
	/* [0,10] up to burn's sample, [10,30] up to the frame it blocked in */
	assert_int_equal(us_of(&r, AK_CPU, "burn (p.py:3)"), 10000);
	assert_int_equal(us_of(&r, AK_CPU, "load (p.py:9)"), 20000 + 40000);
	assert_int_equal(us_of(&r, AK_CPU, "nap (p.py:7)"), -1);
	attr_result_free(&r);
}

/* 200 ms of a CUDA call, half on a CPU and half in a sleep: gpu, the
 * call's name; the rest cpu and sleep as before; the tiles exact */
static void test_time_in_a_cuda_call_is_gpu(void **st)
{
	struct attr_off o[] = {off(10, 10, 300, 700, -1, AK_SLEEP, "clock_nanosleep")};
	struct attr_gpu_call g[] = {{10, 200, 400, "cudaMalloc"}, {99, 0, 1000, "not ours"}};
	struct attr_input in = {0, 1000, 10, o, 1, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, g, 2};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 1000000);
	assert_int_equal(us_of(&r, AK_GPU, "cudaMalloc"), 200000);
	assert_int_equal(kind_us(&r, AK_GPU), 200000);
	assert_int_equal(us_of(&r, AK_SLEEP, "clock_nanosleep"), 300000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 500000);
	/* the strip: cpu, gpu, sleep, cpu */
	assert_int_equal(r.n_segs, 4);
	assert_int_equal(r.segs[1].kind, AK_GPU);
	assert_true(r.segs[1].start == 200 && r.segs[1].end == 400);
	assert_string_equal(r.segs[1].what, "cudaMalloc");
	attr_result_free(&r);
}

/* a wait on another thread inside a CUDA call stays gpu (no hop); outside
 * one the hop finds the waker in its own call (gpu too); a driver call
 * nested in a runtime call is the runtime call's */
static void test_gpu_is_decided_before_a_hop(void **st)
{
	struct attr_off o[] = {off(10, 10, 100, 300, -1, AK_LOCK, "futex"),
			       off(10, 10, 500, 700, -1, AK_LOCK, "futex")};
	struct attr_gpu_call g[] = {{10, 150, 250, "cuMemAlloc_v2"},
				    {10, 100, 300, "CUDA init"},
				    {11, 550, 650, "cudaMemcpy"}};
	struct attr_input in = {0, 1000, 10, o, 2, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, g, 3};
	struct attr_result r;

	(void)st;
	o[0].hop = o[1].hop = HOP_WAKER;
	o[0].waker_pid = o[1].waker_pid = 10;
	o[0].waker_tid = o[1].waker_tid = 11;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 1000000);
	assert_int_equal(us_of(&r, AK_GPU, "CUDA init"), 200000);
	assert_int_equal(us_of(&r, AK_GPU, "cuMemAlloc_v2"), -1);
	assert_int_equal(us_of(&r, AK_GPU, "cudaMemcpy"), 100000);
	assert_int_equal(us_of(&r, AK_CPU, "python3 (thread)"), 100000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), 600000);
	assert_int_equal(kind_us(&r, AK_LOCK), 0);
	attr_result_free(&r);
}

static void test_store_names_code_objects(void **st)
{
	struct attr_store s = {0};
	struct tl_pycode_event c = {.type = EV_PYCODE, .pid = 10, .code = 0x1234, .line = 41};
	struct tl_pysample_event smp = {.type = EV_PYSAMPLE, .pid = 10, .tid = 10, .code = 0x1234};
	char out[96];

	(void)st;
	snprintf(c.name, sizeof(c.name), "Loader.burn");
	snprintf(c.file, sizeof(c.file), "/srv/app/tests/helpers/phases.py");
	attr_store_add(&s, &c, sizeof(c));
	attr_store_add(&s, &smp, sizeof(smp));
	assert_int_equal(s.n_codes, 1);
	assert_int_equal(s.n_samples, 1);
	assert_true(attr_store_pyname(&s, 10, 0x1234, out, sizeof(out)));
	assert_string_equal(out, "Loader.burn (helpers/phases.py:41)");
	assert_false(attr_store_pyname(&s, 11, 0x1234, out, sizeof(out))); /* another process */
	assert_false(attr_store_pyname(&s, 10, 0, out, sizeof(out)));
	attr_store_free(&s);
}

/* ---- classification of kernel records ---- */

static bool file_name(void *ctx, __u64 dev, __u64 ino, char *out, size_t len)
{
	(void)ctx;
	if (dev != 8 || ino != 42)
		return false;
	snprintf(out, len, "/models/gpt.pth");
	return true;
}

static bool peer_name(void *ctx, int family, const __u8 *addr, int port, char *out, size_t len)
{
	(void)ctx;
	snprintf(out, len, "%s%u:%d", family == AF_INET ? "v4:" : "?", addr[0], port);
	return true;
}

static bool in_tree(void *ctx, int pid)
{
	(void)ctx;
	return pid == 10 || pid == 30;
}

static bool py_name(void *ctx, int pid, __u64 code, char *out, size_t len)
{
	(void)ctx;
	snprintf(out, len, "nap (p.py:%d)", (int)code + pid);
	return true;
}

static const struct attr_names names = {file_name, peer_name, in_tree, py_name, NULL};

static struct attr_off classify(struct tl_off_event *e)
{
	struct attr_off o;

	if (!e->pid)
		e->pid = 10;
	if (!e->tid)
		e->tid = 10;
	attr_classify(e, 1, 2, 1.5, &names, &o);
	return o;
}

static void test_classify(void **st)
{
	struct tl_off_event e;
	struct attr_off o;

	(void)st;
	memset(&e, 0, sizeof(e));
	e.reason = OFF_RUNQ;
	e.nr = SYS_read;
	assert_int_equal(classify(&e).kind, AK_RUNQ);

	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_recvfrom;
	e.obj = OFFOBJ_SOCKET;
	e.family = AF_INET;
	e.port = 443;
	e.addr[0] = 127;
	o = classify(&e);
	assert_int_equal(o.kind, AK_NET);
	assert_string_equal(o.what, "v4:127:443");

	memset(&e, 0, sizeof(e));
	e.reason = OFF_IO;
	e.nr = SYS_pread64;
	e.obj = OFFOBJ_FILE;
	e.dev = 8;
	e.ino = 42;
	o = classify(&e);
	assert_int_equal(o.kind, AK_DISK);
	assert_string_equal(o.what, "/models/gpt.pth");

	e.nr = SYS_flock;
	e.reason = OFF_SLEEP;
	assert_int_equal(classify(&e).kind, AK_LOCK);

	memset(&e, 0, sizeof(e));
	e.reason = OFF_IO;
	e.nr = TRACE_SYSNR_NONE;
	e.flags = OFFF_FAULT;
	e.obj = OFFOBJ_FILE;
	e.dev = 8;
	e.ino = 42;
	o = classify(&e);
	assert_int_equal(o.kind, AK_FAULT);
	assert_string_equal(o.what, "/models/gpt.pth");

	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_clock_nanosleep;
	o = classify(&e);
	assert_int_equal(o.kind, AK_SLEEP);
	assert_string_equal(o.what, "clock_nanosleep");
	e.pycode = 2; /* its Python caller names it */
	o = classify(&e);
	assert_string_equal(o.what, "nap (p.py:12)");
	assert_string_equal(o.py, "nap (p.py:12)");
	e.pycode = 0;

	e.nr = SYS_poll;
	e.flags = OFFF_NOFDS;
	assert_int_equal(classify(&e).kind, AK_SLEEP);

	/* a futex: the wait of a thread for another of its process */
	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_futex;
	o = classify(&e);
	assert_int_equal(o.kind, AK_LOCK);
	assert_int_equal(o.hop, HOP_NONE);
	e.flags = OFFF_WOKEN;
	e.waker_pid = 10;
	e.waker_tid = 11;
	assert_int_equal(classify(&e).hop, HOP_WAKER);

	/* wait4 ended by a child of the tree: that child, by name */
	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_wait4;
	e.flags = OFFF_WOKEN;
	e.waker_pid = e.waker_tid = 30;
	memcpy(e.waker_comm, "sleep", 6);
	o = classify(&e);
	assert_int_equal(o.kind, AK_CHILD);
	assert_string_equal(o.what, "sleep");
	assert_int_equal(o.hop, HOP_PROCESS);
	/* woken by a process outside the tree: no hop */
	e.waker_pid = e.waker_tid = 99;
	assert_int_equal(classify(&e).hop, HOP_NONE);

	/* a pipe written by a process of the tree */
	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_read;
	e.obj = OFFOBJ_PIPE;
	e.flags = OFFF_WOKEN;
	e.waker_pid = e.waker_tid = 30;
	memcpy(e.waker_comm, "git", 4);
	o = classify(&e);
	assert_int_equal(o.kind, AK_CHILD);
	assert_string_equal(o.what, "git");

	/* a read of a terminal: not explained */
	memset(&e, 0, sizeof(e));
	e.reason = OFF_SLEEP;
	e.nr = SYS_read;
	e.obj = OFFOBJ_OTHER;
	o = classify(&e);
	assert_int_equal(o.kind, AK_OTHER);
	assert_string_equal(o.what, "read");
	assert_true(o.wake == -1);
}

static void test_kind_names(void **st)
{
	(void)st;
	for (int k = 0; k < AK_N; k++)
		assert_int_equal(attr_kind_of(attr_kind_name((enum attr_kind)k)), k);
	assert_int_equal(attr_kind_of("bogus"), AK_N);
	assert_int_equal(attr_kind_of(NULL), AK_N);
	assert_string_equal(attr_syscall_name(SYS_futex), "futex");
	assert_null(attr_syscall_name(-5));
}

static void test_store_keeps_records(void **st)
{
	struct attr_store s = {0};
	struct tl_off_event e = {.type = EV_OFFCPU, .tid = 7};

	(void)st;
	attr_store_add(&s, &e, sizeof(e) - 1); /* short: ignored */
	for (int i = 0; i < 3000; i++)
		attr_store_add(&s, &e, sizeof(e));
	assert_int_equal(s.n, 3000);
	assert_int_equal(s.recs[2999].tid, 7);
	attr_store_free(&s);
	assert_null(s.recs);
}

/* The main thread sleeps in a polling loop (and at last waits in a
 * futex) while the thread that will listen waits on a peer: from that
 * thread's first sign of life, the main thread's waits are its. */
static void test_listening_thread_is_followed(void **st)
{
	struct attr_off o[] = {
	    off(10, 10, 10, 30, -1, AK_SLEEP, "clock_nanosleep"),
	    off(10, 10, 30, 60, -1, AK_SLEEP, "clock_nanosleep"),
	    off(10, 10, 60, 120, -1, AK_LOCK, "futex"),
	    off(10, 11, 25, 80, -1, AK_NET, "hf.co:443"),
	};
	struct attr_input in = {0, 100, 10, o, 4, procs1, 1, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	in.listen_pid = 10;
	in.listen_tid = 11;
	in.listen_from = 25;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	/* the first sleep began before the listener was seen: the main
	 * thread's own; then the listener's wait on the peer, its cpu after */
	assert_int_equal(us_of(&r, AK_SLEEP, "clock_nanosleep"), 20000);
	assert_int_equal(us_of(&r, AK_NET, "hf.co:443"), 50000);
	assert_int_equal(us_of(&r, AK_CPU, "python3 (thread)"), 20000);
	assert_int_equal(kind_us(&r, AK_LOCK), 0);
	attr_result_free(&r);
	/* without the listener: the main thread's sleeps and futex */
	in.listen_tid = 0;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_int_equal(us_of(&r, AK_SLEEP, "clock_nanosleep"), 50000);
	assert_int_equal(us_of(&r, AK_LOCK, "futex"), 40000);
	attr_result_free(&r);
}

/* cpu with no Python frame: the library the samples saw, in a stretch
 * without a sample the thread's last one; inside an import, the import */
static void test_native_samples_name_cpu(void **st)
{
	struct attr_off o[] = {off(10, 10, 40, 50, -1, AK_SLEEP, "nanosleep")};
	struct attr_sample sm[] = {
	    {10, 10, "libtorch_cpu.so", true},
	    {10, 30, "libc.so.6", true},
	    {10, 70, "libtorch_cpu.so", true},
	};
	struct attr_import im[] = {{10, 80, 100, "torch"}};
	struct attr_input in = {0, 100, 10, o, 1, procs1, 1, im, 1, sm, 3, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	/* [0,10) up to the first sample, [30,40) the last before the sleep,
	 * [50,70) up to the next, [70,80) after it: libtorch 10+20+10; libc
	 * [10,30) and [30,40) */
	assert_int_equal(us_of(&r, AK_CPU, "libtorch_cpu.so"), 40000);
	assert_int_equal(us_of(&r, AK_CPU, "libc.so.6"), 30000);
	assert_int_equal(us_of(&r, AK_CPU, "import torch"), 20000);
	assert_int_equal(us_of(&r, AK_CPU, "python3"), -1);
	attr_result_free(&r);
}

/* /proc/PID/maps lines: the range, executable or not, the base name */
static void test_native_maps_lines(void **st)
{
	__u64 lo, hi;
	bool x;
	char name[64];

	(void)st;
	assert_true(natives_parse_line("7f0a12340000-7f0a12350000 r-xp 00001000 08:01 1234        "
				       "          /opt/venv/lib/torch/lib/libtorch_cpu.so\n",
				       &lo, &hi, &x, name, sizeof(name)));
	assert_true(lo == 0x7f0a12340000ull && hi == 0x7f0a12350000ull && x);
	assert_string_equal(name, "libtorch_cpu.so");
	assert_true(natives_parse_line("7ffd1000-7ffd3000 r-xp 00000000 00:00 0   [vdso]\n", &lo,
				       &hi, &x, name, sizeof(name)));
	assert_string_equal(name, "[vdso]");
	assert_true(natives_parse_line("55aa0000-55ab0000 rw-p 00000000 00:00 0 \n", &lo, &hi, &x,
				       name, sizeof(name)));
	assert_false(x);
	assert_string_equal(name, "anonymous memory");
	assert_true(natives_parse_line("1000-2000 r-xp 00000000 08:01 9 /usr/bin/python3.11 "
				       "(deleted)\n",
				       &lo, &hi, &x, name, sizeof(name)));
	assert_string_equal(name, "python3.11");
	assert_false(natives_parse_line("garbage\n", &lo, &hi, &x, name, sizeof(name)));
}

/* the samples the walk met on the critical path, kept in time order, each
 * named by the cause its instant counts for: the function, the import in
 * progress for a module body, the library of a native one; another
 * thread's (not on the path) left out */
static void test_samples_are_kept_named_by_their_cause(void **st)
{
	struct attr_sample s[] = {{10, 20, "burn (p.py:3)", false},
				  {10, 40, "burn (p.py:3)", false},
				  {10, 70, "libc.so.6", true},
				  {10, 85, "<module> (json/__init__.py:1)", false},
				  {11, 30, "other thread", false}};
	struct attr_import im[] = {{10, 80, 100, "json"}};
	struct attr_input in = {0, 100, 10, NULL, 0, procs1, 1, im, 1, s, 5, 0, 0, 0, NULL, 0};
	const char *want[] = {"burn (p.py:3)", "burn (p.py:3)", "libc.so.6", "import json"};
	double at[] = {20, 40, 70, 85};
	struct attr_result r;

	(void)st;
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 100000);
	assert_int_equal(r.samples.n, 4);
	assert_int_equal(r.samples.dropped, 0);
	assert_int_equal(r.samples.n_frames, 3);
	assert_int_equal(r.samples.n_threads, 1);
	assert_int_equal(r.samples.threads[0].pid, 10);
	assert_int_equal(r.samples.threads[0].tid, 10);
	for (size_t i = 0; i < 4; i++) {
		assert_true(r.samples.v[i].t == at[i]);
		assert_string_equal(r.samples.frames[r.samples.v[i].frame], want[i]);
	}
	attr_result_free(&r);
}

/* at most ATTR_MAX_SAMPLES kept, the first in time order; the rest
 * counted, and the breakdown still uses them all */
static void test_samples_are_bounded(void **st)
{
	size_t n = ATTR_MAX_SAMPLES + 10;
	struct attr_sample *s = calloc(n, sizeof(*s));
	struct attr_input in = {0, 30000, 10, NULL, 0, procs1, 1, NULL, 0, s, n, 0, 0, 0, NULL, 0};
	struct attr_result r;

	(void)st;
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (struct attr_sample){
		    10, (double)i + 0.5, i < ATTR_MAX_SAMPLES ? "burn (p.py:3)" : "late (p.py:9)",
		    false};
	assert_int_equal(attr_breakdown(&in, &r), 0);
	assert_tiles(&r, 30000000);
	assert_int_equal(r.samples.n, ATTR_MAX_SAMPLES);
	assert_int_equal(r.samples.dropped, 10);
	assert_int_equal(r.samples.n_frames, 1);
	assert_true(r.samples.v[ATTR_MAX_SAMPLES - 1].t == ATTR_MAX_SAMPLES - 0.5);
	/* the dropped ones still name their cpu: [20000, 20010) up to them */
	assert_int_equal(us_of(&r, AK_CPU, "late (p.py:9)"), 10000 + (30000 - 20009.5) * 1000);
	attr_result_free(&r);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_records_is_all_cpu),
	    cmocka_unit_test(test_wait_then_runqueue_after_wakeup),
	    cmocka_unit_test(test_overlaps_and_window_edges_count_once),
	    cmocka_unit_test(test_wait_on_another_thread_is_what_it_did),
	    cmocka_unit_test(test_wait_on_a_thread_waiting_on_a_third),
	    cmocka_unit_test(test_child_and_followed_process),
	    cmocka_unit_test(test_cpu_inside_an_import_and_exit),
	    cmocka_unit_test(test_many_causes_are_capped_keeping_the_sum),
	    cmocka_unit_test(test_strip_of_thousands_of_runs_keeps_its_end),
	    cmocka_unit_test(test_samples_name_the_cpu),
	    cmocka_unit_test(test_sample_during_a_syscall_keeps_the_wait),
	    cmocka_unit_test(test_time_in_a_cuda_call_is_gpu),
	    cmocka_unit_test(test_gpu_is_decided_before_a_hop),
	    cmocka_unit_test(test_store_names_code_objects),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_kind_names),
	    cmocka_unit_test(test_store_keeps_records),
	    cmocka_unit_test(test_listening_thread_is_followed),
	    cmocka_unit_test(test_native_samples_name_cpu),
	    cmocka_unit_test(test_samples_are_kept_named_by_their_cause),
	    cmocka_unit_test(test_samples_are_bounded),
	    cmocka_unit_test(test_native_maps_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
