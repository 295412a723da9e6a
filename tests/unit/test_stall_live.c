/* stall: the critical thread's live state (attrib_live.h) in the stall
 * lines: first when it says on what the thread waits, merged into the
 * line of a peer another rule names (with its attempts), through a child
 * and a thread of its own, and only in place of "unknown" when it says
 * nothing (on a CPU, a sleep). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attrib_live.h"
#include "stall.h"
#include "timeline_internal.h"

/* three attempts on huggingface.co, the last still open and unanswered */
static const char *const HUB =
    "{\"network\": [{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"host\":"
    " \"huggingface.co\", \"role\": \"hub\", \"bytes_in\": 279, \"bytes_out\": 800,"
    " \"dns\": false, \"last_ms\": 9000}],"
    " \"connects\": ["
    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 1000,"
    " \"established_ms\": 1000, \"closed_ms\": 5000, \"bytes_in\": 279, \"bytes_out\": 400,"
    " \"writes\": 2, \"reply_max\": 0},"
    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 5500,"
    " \"established_ms\": 5500, \"closed_ms\": 6500, \"bytes_in\": 0, \"bytes_out\": 200,"
    " \"writes\": 1, \"reply_max\": 0},"
    "{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"pid\": 7, \"start_ms\": 9000,"
    " \"established_ms\": 9000, \"closed_ms\": null, \"bytes_in\": 0, \"bytes_out\": 200,"
    " \"writes\": 1, \"reply_max\": 0}]}";

static json_t *said(const char *text, const struct attr_live *l, double now)
{
	json_error_t e;
	json_t *root = json_loads(text, 0, &e), *w;
	struct tl_view *v;

	if (!root)
		fail_msg("bad test JSON: %s", e.text);
	v = tl_view_decode_tree(root);
	assert_non_null(v);
	attr_live_set(l);
	w = stall_waiting_on(v, NULL, NULL, NULL, 2000, now);
	attr_live_set(NULL);
	tl_view_free(v);
	json_decref(root);
	return w;
}

static const char *msg(json_t *w, size_t i)
{
	return json_string_value(json_object_get(json_array_get(w, i), "message"));
}

static const char *kind(json_t *w, size_t i)
{
	return json_string_value(json_object_get(json_array_get(w, i), "kind"));
}

static struct attr_live_hop hop(int pid, int tid, const char *comm, int state, enum attr_kind k,
				const char *what, const char *call, double since)
{
	struct attr_live_hop h = {
	    .pid = pid, .tid = tid, .state = state, .kind = k, .since_ms = since};

	snprintf(h.comm, sizeof(h.comm), "%s", comm);
	snprintf(h.what, sizeof(h.what), "%s", what);
	snprintf(h.call, sizeof(h.call), "%s", call);
	return h;
}

/* a thread of its own blocked on the hub: said on the hub's line */
static void test_thread_on_a_named_peer(void **st)
{
	struct attr_live l = {.valid = true, .at_ms = 21000, .n_hops = 2};
	json_t *w, *b;

	(void)st;
	l.hop[0] = hop(7, 7, "python3", LIVE_BLOCKED, AK_LOCK, "futex", "futex", 3000);
	l.hop[1] =
	    hop(7, 9, "python3", LIVE_BLOCKED, AK_NET, "huggingface.co:443", "recvfrom", 9000);
	snprintf(l.hop[1].peer, sizeof(l.hop[1].peer), "127.0.0.2:443");
	w = said(HUB, &l, 21000);
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(kind(w, 0), "peer-silent");
	assert_non_null(strstr(msg(w, 0), "waiting 20 s for an answer from huggingface.co:443, "
					  "3rd attempt"));
	assert_non_null(strstr(msg(w, 0), "; the main thread of python3 (pid 7) waits on its "
					  "thread 9, which is blocked in recvfrom on it for 12 s"));
	b = json_object_get(json_array_get(w, 0), "blocked");
	assert_string_equal(json_string_value(json_object_get(b, "state")), "net");
	assert_int_equal(json_integer_value(json_object_get(b, "attempt")), 3);
	assert_int_equal(json_integer_value(json_object_get(b, "tid")), 9);
	json_decref(w);
}

/* a peer no other rule says (nothing asked on it yet): its own line, first */
static void test_peer_no_rule_names(void **st)
{
	struct attr_live l = {.valid = true, .at_ms = 21000, .n_hops = 1};
	json_t *w;

	(void)st;
	l.hop[0] = hop(7, 7, "python3", LIVE_BLOCKED, AK_NET, "10.9.9.9:5000", "poll", 15000);
	snprintf(l.hop[0].peer, sizeof(l.hop[0].peer), "10.9.9.9:5000");
	snprintf(l.hop[0].py, sizeof(l.hop[0].py), "fetch (app/net.py:12)");
	w = said(HUB, &l, 21000);
	assert_string_equal(kind(w, 0), "blocked");
	assert_string_equal(msg(w, 0), "the main thread of python3 (pid 7) is blocked for 6 s in "
				       "poll on 10.9.9.9:5000, in fetch (app/net.py:12)");
	assert_string_equal(kind(w, 1), "peer-silent");
	json_decref(w);
}

/* a child and what it does; a file lock by its path */
static void test_child_and_lock(void **st)
{
	struct attr_live l = {.valid = true, .at_ms = 10000, .n_hops = 2};
	json_t *w;

	(void)st;
	l.hop[0] = hop(7, 7, "uv", LIVE_BLOCKED, AK_CHILD, "python3", "wait4", 1000);
	l.hop[1] = hop(8, 8, "python3", LIVE_BLOCKED, AK_LOCK, "/m/.lock", "flock", 4000);
	w = said("{}", &l, 10000);
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(msg(w, 0), "the main thread of uv (pid 7) waits for its child python3 "
				       "(pid 8), whose main thread is waiting for 6 s in flock for "
				       "the lock /m/.lock: another process holds it");
	json_decref(w);
	/* disk */
	l.n_hops = 1;
	l.hop[0] = hop(7, 7, "python3", LIVE_BLOCKED, AK_DISK, "/m/gpt.pth", "read", 7000);
	w = said("{}", &l, 10000);
	assert_string_equal(msg(w, 0), "the main thread of python3 (pid 7) is blocked for 3 s in "
				       "read on /m/gpt.pth (disk I/O)");
	json_decref(w);
}

/* on a CPU or in a sleep: only in place of "unknown"; stale or short: nothing */
static void test_last_resort_and_freshness(void **st)
{
	struct attr_live l = {.valid = true, .at_ms = 21000, .n_hops = 1};
	json_t *w;

	(void)st;
	l.hop[0] = hop(7, 7, "python3", LIVE_CPU, AK_CPU, "build (app/ui.py:3)", "", 15000);
	w = said("{}", &l, 21000);
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(msg(w, 0), "the main thread of python3 (pid 7) is on a CPU for 6 s "
				       "without waiting for anything, in build (app/ui.py:3): busy "
				       "computing");
	json_decref(w);
	/* a sleep beside the hub's line: the hub's line only */
	l.hop[0] = hop(7, 7, "python3", LIVE_BLOCKED, AK_SLEEP, "clock_nanosleep",
		       "clock_nanosleep", 19000);
	w = said(HUB, &l, 21000);
	assert_int_equal(json_array_size(w), 1);
	assert_string_equal(kind(w, 0), "peer-silent");
	json_decref(w);
	/* younger than a second, or a state from long ago: "unknown" */
	l.hop[0] = hop(7, 7, "python3", LIVE_BLOCKED, AK_DISK, "/m/x", "read", 20500);
	w = said("{}", &l, 21000);
	assert_string_equal(kind(w, 0), "unknown");
	json_decref(w);
	l.hop[0].since_ms = 1000;
	w = said("{}", &l, 60000);
	assert_string_equal(kind(w, 0), "unknown");
	json_decref(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_thread_on_a_named_peer),
	    cmocka_unit_test(test_peer_no_rule_names),
	    cmocka_unit_test(test_child_and_lock),
	    cmocka_unit_test(test_last_resort_and_freshness),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
