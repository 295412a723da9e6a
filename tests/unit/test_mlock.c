/* The launcher side of the mlock shim: the environment it prepares, the
 * report socket, parsing reports into memory.mlock, the lines it says
 * and the fixes it suggests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "classify.h"
#include "clock.h"
#include "config.h"
#include "mlock.h"
#include "spawn.h"
#include "timeline.h"
#include "timeline_internal.h"

static const char *get(char **envp, const char *name)
{
	size_t len = strlen(name);

	for (char **e = envp; *e; e++)
		if (!strncmp(*e, name, len) && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

static void setup_config(struct config *c, const char *mode)
{
	char err[CONFIG_ERR_MAX], set[64];

	config_defaults(c);
	snprintf(set, sizeof(set), "mlock.mode=%s", mode);
	assert_int_equal(config_set(c, "app.dir=/tmp", err, sizeof(err)), 0);
	assert_int_equal(config_set(c, set, err, sizeof(err)), 0);
	assert_int_equal(config_finish(c, err, sizeof(err)), 0);
}

static void test_off_injects_nothing(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct config c;
	char *base[] = {"PATH=/usr/bin", NULL};
	char **envp;
	char msg[256] = "";

	(void)state;
	setup_config(&c, "off");
	envp = spawn_build_env(&c, base);
	assert_int_equal(mlock_prepare(&m, &c, &envp, msg, sizeof(msg)), 0);
	assert_null(get(envp, "LD_PRELOAD"));
	assert_null(get(envp, "TTS_LAUNCH_MLOCK_MODE"));
	assert_int_equal(mlock_fd(&m), -1);
	assert_false(mlock_wants_ipc_lock(&m));
	spawn_env_free(envp);
	mlock_free(&m);
	config_free(&c);
}

/* The unit test binary is build/tests/unit/test_mlock: the shim is looked
 * for next to it, where it is not; with the build tree's layout
 * (build/hooks/) it is found from build/tts-launch only. */
static void test_missing_shim_warns(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct config c;
	char *base[] = {"PATH=/usr/bin", NULL};
	char **envp;
	char msg[1024] = "";

	(void)state;
	setup_config(&c, "all");
	envp = spawn_build_env(&c, base);
	assert_int_equal(mlock_prepare(&m, &c, &envp, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "mlock_shim.so was not found"));
	assert_null(get(envp, "LD_PRELOAD"));
	assert_false(mlock_wants_ipc_lock(&m));
	spawn_env_free(envp);
	mlock_free(&m);
	config_free(&c);
}

static json_t *ev(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	assert_non_null(j);
	return j;
}

static void test_describe_and_fix(void **state)
{
	json_t *locked = ev("{\"event\":\"locked\",\"trigger\":\"listen\",\"mode\":\"all\","
			    "\"vmlck\":432013312,\"dur_ns\":310000000}");
	json_t *models = ev("{\"event\":\"locked\",\"trigger\":\"signal\",\"mode\":\"models\","
			    "\"vmlck\":16777216,\"mappings\":3,\"dur_ns\":10000000}");
	json_t *eperm = ev("{\"event\":\"failed\",\"trigger\":\"listen\",\"mode\":\"all\","
			   "\"errno\":\"EPERM\",\"error\":\"Operation not permitted\","
			   "\"cap_ipc_lock\":false,\"rlimit_memlock\":0}");
	json_t *enomem = ev("{\"event\":\"failed\",\"trigger\":\"listen\",\"mode\":\"all\","
			    "\"errno\":\"ENOMEM\",\"error\":\"Cannot allocate memory\","
			    "\"cap_ipc_lock\":false,\"rlimit_memlock\":8388608}");
	json_t *refused = ev("{\"event\":\"refused\",\"trigger\":\"delay\",\"mode\":\"all\","
			     "\"bytes_to_lock\":10737418240,\"limit\":1073741824}");
	char *s, *fix;

	(void)state;
	s = mlock_describe(locked, NULL);
	assert_string_equal(s, "tts-launch: mlock (all, at listen): locked 412.0 MiB in 0.31 s\n");
	free(s);
	s = mlock_describe(models, NULL);
	assert_string_equal(s, "tts-launch: mlock (models, at signal): locked 16.0 MiB (3 model "
			       "mappings) in 0.01 s\n");
	free(s);
	assert_null(mlock_fix(locked, false));

	fix = mlock_fix(eperm, false);
	assert_non_null(strstr(fix, "CAP_IPC_LOCK"));
	s = mlock_describe(eperm, fix);
	assert_non_null(strstr(s, "mlock (all, at listen) failed: EPERM: Operation not permitted; "
				  "fix: run the service as root"));
	assert_non_null(strstr(s, "the service keeps running"));
	free(s);
	free(fix);

	fix = mlock_fix(enomem, true);
	assert_non_null(strstr(fix, "RLIMIT_MEMLOCK (8.0 MiB)"));
	free(fix);

	fix = mlock_fix(refused, false);
	assert_non_null(strstr(fix, "[mlock] limit"));
	s = mlock_describe(refused, fix);
	assert_non_null(strstr(s, "refused: 10.0 GiB to lock, above the limit of 1.0 GiB"));
	free(s);
	free(fix);
	json_decref(locked);
	json_decref(models);
	json_decref(eperm);
	json_decref(enomem);
	json_decref(refused);
}

/* Reports arrive on the socket and land in memory.mlock. */
static void test_poll_into_timeline(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct config c;
	struct timeline *tl;
	int sv[2];
	char *text;
	json_t *obj;
	static const char armed[] = "{\"event\":\"armed\",\"pid\":42,\"trigger\":\"listen\","
				    "\"mode\":\"models\",\"limit\":1000,\"cap_ipc_lock\":true}\n";
	static const char locked[] =
	    "{\"event\":\"locked\",\"pid\":42,\"trigger\":\"listen\","
	    "\"mode\":\"models\",\"bytes_to_lock\":4096,\"resident\":0,"
	    "\"mappings\":1,\"start_ns\":1,\"dur_ns\":2000000,\"vmlck\":4096}\n";

	(void)state;
	clock_init();
	setup_config(&c, "models");
	tl = timeline_new(&c, 0, NULL);
	/* what mlock_prepare sets up, without a shim on disk */
	m.mode = MLOCK_MODELS;
	m.state = json_pack("{s:s, s:s, s:b, s:s, s:[]}", "mode", "models", "trigger", "listen",
			    "loaded", 0, "status", "pending", "events");
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	m.fd = sv[0];
	assert_true(send(sv[1], "not json\n", 9, 0) == 9); /* rejected, said once */
	assert_true(send(sv[1], armed, strlen(armed), 0) == (ssize_t)strlen(armed));
	text = mlock_poll(&m, tl); /* armed: nothing to say */
	assert_non_null(text);
	assert_non_null(strstr(text, "report from the service was rejected (not a JSON object)"));
	assert_null(strstr(text, "armed"));
	free(text);
	assert_null(mlock_check_loaded(&m));
	assert_true(send(sv[1], locked, strlen(locked), 0) == (ssize_t)strlen(locked));
	text = mlock_poll(&m, tl);
	assert_non_null(text);
	assert_non_null(
	    strstr(text, "mlock (models, at listen): locked 4.0 KiB (1 model mapping)"));
	free(text);

	obj = json_object_get(json_object_get(timeline_json(tl), "memory"), "mlock");
	assert_string_equal(json_string_value(json_object_get(obj, "status")), "locked");
	assert_true(json_is_true(json_object_get(obj, "loaded")));
	assert_int_equal(json_integer_value(json_object_get(obj, "bytes_locked")), 4096);
	assert_int_equal(json_integer_value(json_object_get(obj, "pid")), 42);
	assert_int_equal(json_array_size(json_object_get(obj, "events")), 2);
	assert_true(json_is_null(json_object_get(obj, "fix")));
	/* the outcome is the service's word */
	assert_string_equal(json_string_value(json_object_get(obj, "source")), "service-report");
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(obj, "reports"), "rejected")), 1);
	/* memory.mlock_calls (the tracer's traced calls) is left alone */
	assert_true(json_is_array(
	    json_object_get(json_object_get(timeline_json(tl), "memory"), "mlock_calls")));
	close(sv[1]);
	mlock_free(&m);
	timeline_free(tl);
	config_free(&c);
}

static json_t *mlock_of(struct timeline *tl)
{
	return json_object_get(json_object_get(timeline_json(tl), "memory"), "mlock");
}

static long long report_count(struct timeline *tl, const char *k)
{
	return json_integer_value(json_object_get(json_object_get(mlock_of(tl), "reports"), k));
}

static void fake_shim(struct mlock_ctl *m, int *sv)
{
	m->mode = MLOCK_ALL;
	m->state = json_pack("{s:s, s:s, s:b, s:s, s:[]}", "mode", "all", "trigger", "listen",
			     "loaded", 0, "status", "pending", "events");
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	m->fd = sv[0];
}

static void send_str(int fd, const char *s)
{
	assert_true(send(fd, s, strlen(s), 0) == (ssize_t)strlen(s));
}

/* A service that floods the socket: a bounded number of reports is kept,
 * the rest counted, and the lines said stay few. */
static void test_flood_is_capped(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct timeline *tl;
	struct config c;
	char big[3000];
	size_t said = 0;
	int sv[2];
	json_t *obj;

	(void)state;
	clock_init();
	setup_config(&c, "all");
	tl = timeline_new(&c, 0, NULL);
	fake_shim(&m, sv);
	/* valid reports, each with a 2 KB error text beyond what is kept */
	{
		int off = snprintf(big, sizeof(big),
				   "{\"event\":\"failed\",\"pid\":7,\"trigger\":\"listen\","
				   "\"mode\":\"all\",\"errno\":\"ENOMEM\",\"start_ns\":1,"
				   "\"dur_ns\":1,\"error\":\"");

		memset(big + off, 'x', 2000);
		strcpy(big + off + 2000, "\"}");
	}
	for (int round = 0; round < 75; round++) {
		char *text;

		/* 20 at a time: within the socket's send buffer */
		for (int i = 0; i < 20; i++)
			send_str(sv[1], big);
		text = mlock_poll(&m, tl);
		if (text) {
			for (char *p = text; (p = strchr(p, '\n')); p++)
				said++;
			free(text);
		}
	}
	obj = mlock_of(tl);
	assert_true(json_array_size(json_object_get(obj, "events")) <= MLOCK_KEEP_EVENTS);
	assert_int_equal(report_count(tl, "received"), 1500);
	assert_int_equal(report_count(tl, "kept") + report_count(tl, "dropped"), 1500);
	assert_true(report_count(tl, "dropped") >= 1500 - MLOCK_KEEP_EVENTS);
	assert_true(report_count(tl, "dropped_bytes") >= (1500 - MLOCK_KEEP_EVENTS) * 2000LL);
	assert_true(report_count(tl, "clamped") >= 1); /* the error text, cut */
	assert_true(strlen(json_string_value(json_object_get(obj, "error"))) <= 256);
	assert_true(said <= MLOCK_KEEP_EVENTS + 2);
	close(sv[1]);
	mlock_free(&m);
	timeline_free(tl);
	config_free(&c);
}

/* Fields of the wrong type or range: rejected or clamped, and counted. */
static void test_reports_validated(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct timeline *tl;
	struct config c;
	char *text, late[512];
	int sv[2];
	json_t *obj, *ev;

	(void)state;
	clock_init();
	setup_config(&c, "all");
	tl = timeline_new(&c, 0, NULL);
	fake_shim(&m, sv);
	/* rejected: a negative time, a negative size, a string size, an unknown
	 * event, a pid of 0, a bogus errno */
	send_str(sv[1], "{\"event\":\"locked\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
			"\"start_ns\":-5,\"dur_ns\":1}");
	send_str(sv[1], "{\"event\":\"locked\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
			"\"vmlck\":-4096}");
	send_str(sv[1], "{\"event\":\"locked\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
			"\"vmlck\":\"lots\"}");
	send_str(sv[1], "{\"event\":\"pwned\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\"}");
	send_str(sv[1], "{\"event\":\"armed\",\"pid\":0,\"trigger\":\"listen\",\"mode\":\"all\"}");
	send_str(sv[1], "{\"event\":\"failed\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
			"\"errno\":\"\\u001b[2J\"}");
	/* clamped: a size of 1e18, a start in the future; unknown keys dropped */
	snprintf(late, sizeof(late),
		 "{\"event\":\"locked\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
		 "\"vmlck\":1000000000000000000,\"start_ns\":%llu,\"dur_ns\":5,\"junk\":[1,2,3]}",
		 (unsigned long long)clock_t0_ns() + 3600ULL * 1000000000ULL);
	send_str(sv[1], late);
	text = mlock_poll(&m, tl);
	assert_non_null(text);
	assert_non_null(strstr(text, "rejected (start_ns = -5 is below 0)"));
	free(text);
	assert_int_equal(report_count(tl, "received"), 7);
	assert_int_equal(report_count(tl, "rejected"), 6);
	assert_int_equal(report_count(tl, "kept"), 1);
	assert_int_equal(report_count(tl, "clamped"), 3); /* vmlck, start, dur (start = now) */
	obj = mlock_of(tl);
	assert_int_equal(json_array_size(json_object_get(obj, "events")), 1);
	ev = json_array_get(json_object_get(obj, "events"), 0);
	assert_null(json_object_get(ev, "junk"));
	assert_true(json_integer_value(json_object_get(ev, "vmlck")) == 1LL << 50);
	/* never after now */
	assert_true(json_real_value(json_object_get(ev, "start_ms")) <= clock_ms());
	assert_true(json_integer_value(json_object_get(obj, "bytes_locked")) == 1LL << 50);
	close(sv[1]);
	mlock_free(&m);
	timeline_free(tl);
	config_free(&c);
}

/* The shim's "unknown" VmLck (-1, /proc/self/status unreadable) keeps the
 * report: the outcome is said, the locked size left unknown. */
static void test_unknown_vmlck_keeps_the_report(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct timeline *tl;
	struct config c;
	char *text;
	int sv[2];
	json_t *obj;

	(void)state;
	clock_init();
	setup_config(&c, "all");
	tl = timeline_new(&c, 0, NULL);
	fake_shim(&m, sv);
	send_str(sv[1], "{\"event\":\"locked\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
			"\"bytes_to_lock\":4096,\"vmlck_before\":-1,\"vmlck\":-1}");
	text = mlock_poll(&m, tl);
	free(text);
	assert_int_equal(report_count(tl, "rejected"), 0);
	assert_int_equal(report_count(tl, "kept"), 1);
	obj = mlock_of(tl);
	assert_string_equal(json_string_value(json_object_get(obj, "status")), "locked");
	assert_true(json_is_null(json_object_get(obj, "bytes_locked")));
	close(sv[1]);
	mlock_free(&m);
	timeline_free(tl);
	config_free(&c);
}

/* An error text past TEXT_CAP is cut at a character boundary: "x" then
 * two-byte characters, so byte 256 would be inside one. */
static void test_long_error_cut_at_a_character(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	struct timeline *tl;
	struct config c;
	char msg[1024], *text;
	int sv[2], o;
	const char *kept;
	json_t *ev;

	(void)state;
	clock_init();
	setup_config(&c, "all");
	tl = timeline_new(&c, 0, NULL);
	fake_shim(&m, sv);
	o = snprintf(msg, sizeof(msg),
		     "{\"event\":\"failed\",\"pid\":7,\"trigger\":\"listen\",\"mode\":\"all\","
		     "\"errno\":\"ENOMEM\",\"error\":\"x");
	for (int i = 0; i < 200; i++)
		o += snprintf(msg + o, sizeof(msg) - (size_t)o, "\xc3\xa9");
	snprintf(msg + o, sizeof(msg) - (size_t)o, "\"}");
	send_str(sv[1], msg);
	text = mlock_poll(&m, tl);
	free(text);
	assert_int_equal(report_count(tl, "kept"), 1);
	ev = json_array_get(json_object_get(mlock_of(tl), "events"), 0);
	kept = json_string_value(json_object_get(ev, "error"));
	assert_non_null(kept);
	assert_int_equal(strlen(kept), 255);
	close(sv[1]);
	mlock_free(&m);
	timeline_free(tl);
	config_free(&c);
}

static void test_never_loaded_warns_once(void **state)
{
	struct mlock_ctl m = MLOCK_CTL_INIT;
	int sv[2];
	char *w;

	(void)state;
	m.mode = MLOCK_ALL;
	m.state = json_pack("{s:s, s:b, s:s, s:[]}", "mode", "all", "loaded", 0, "status",
			    "pending", "events");
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	m.fd = sv[0];
	w = mlock_check_loaded(&m);
	assert_non_null(w);
	assert_non_null(strstr(w, "the shim did not load"));
	free(w);
	assert_null(mlock_check_loaded(&m));
	assert_string_equal(json_string_value(json_object_get(m.state, "status")), "not_loaded");
	close(sv[1]);
	mlock_free(&m);
}

static void test_config_keys(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX], globs[512];

	(void)state;
	config_defaults(&c);
	assert_int_equal(c.mlock_trigger, MLOCK_AT_LISTEN);
	assert_int_equal(c.mlock_max_percent, 50);
	/* the default globs are classify.c's model suffixes, not a list of their own */
	classify_model_globs(globs, sizeof(globs));
	assert_string_equal(c.mlock_patterns, globs);
	assert_non_null(strstr(c.mlock_patterns, "*.pth *.pt *.safetensors *.bin"));
	assert_non_null(strstr(c.mlock_patterns, "*.onnx"));
	assert_int_equal(config_set(&c, "mlock.trigger=signal", err, sizeof(err)), 0);
	assert_int_equal(c.mlock_trigger, MLOCK_AT_SIGNAL);
	assert_int_equal(config_set(&c, "mlock.signal=sigusr1", err, sizeof(err)), 0);
	assert_int_equal(c.mlock_signal, MLOCK_SIGUSR1);
	assert_int_equal(config_set(&c, "mlock.limit=4G", err, sizeof(err)), 0);
	assert_true(c.mlock_limit == 4ll << 30);
	assert_int_equal(config_set(&c, "mlock.delay=500ms", err, sizeof(err)), 0);
	assert_true(c.mlock_delay == 0.5);
	assert_int_equal(config_set(&c, "mlock.max_percent=0", err, sizeof(err)), -1);
	assert_int_equal(config_set(&c, "mlock.trigger=callable", err, sizeof(err)), 0);
	assert_int_equal(c.mlock_trigger, MLOCK_AT_CALLABLE);
	assert_int_equal(config_set(&c, "mlock.trigger=whenever", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "listen, signal, delay, callable"));
	assert_int_equal(config_set(&c, "mlock.signal=SIGKILL", err, sizeof(err)), -1);
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_off_injects_nothing),
	    cmocka_unit_test(test_missing_shim_warns),
	    cmocka_unit_test(test_describe_and_fix),
	    cmocka_unit_test(test_poll_into_timeline),
	    cmocka_unit_test(test_never_loaded_warns_once),
	    cmocka_unit_test(test_flood_is_capped),
	    cmocka_unit_test(test_reports_validated),
	    cmocka_unit_test(test_unknown_vmlck_keeps_the_report),
	    cmocka_unit_test(test_long_error_cut_at_a_character),
	    cmocka_unit_test(test_config_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
