/* diagnose_net's rules over small models: the healthy fixture of
 * tests/fixtures/timelines-diagnose/ with its network sections replaced by
 * hand: each rule fires on its pattern and stays silent on the look-alikes
 * (a silent peer that is no download server, need_proxy()'s probe, a TLS
 * handshake without an answer, USE_MODELSCOPE set, Xet switched off). Run
 * from the top of the tree (make unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diagnose.h"
#include "timeline.h"
#include "timeline_internal.h"

static struct timeline *model(const char *network, const char *connects)
{
	char err[512];
	struct timeline *tl =
	    timeline_load("tests/fixtures/timelines-diagnose/healthy.json", err, sizeof(err));
	json_t *root, *n, *c;
	json_error_t je;

	if (!tl)
		fail_msg("%s", err);
	root = timeline_json(tl);
	n = json_loads(network, 0, &je);
	c = json_loads(connects, 0, &je);
	if (!n || !c)
		fail_msg("bad test JSON: %s", je.text);
	json_object_set_new(root, "network", n);
	json_object_set_new(root, "connects", c);
	return tl;
}

static void set_env(struct timeline *tl, const char *name, const char *value)
{
	json_t *vars = json_object_get(
	    json_object_get(
		json_object_get(json_object_get(timeline_json(tl), "launcher"), "config"), "env"),
	    "vars");

	json_object_set_new(vars, name, value ? json_string(value) : json_null());
}

/* No file read or written: nothing cached, nothing downloaded */
static void no_files(struct timeline *tl)
{
	json_object_set_new(timeline_json(tl), "files", json_array());
	json_object_set_new(timeline_json(tl), "downloads", json_array());
	json_object_set_new(timeline_json(tl), "renames", json_array());
}

/* The ids found, comma-separated, into buf */
static const char *ids(struct timeline *tl, char *buf, size_t len)
{
	json_t *f;
	size_t i, o = 0;

	diagnose_run(tl, DIAG_DOWNLOAD);
	buf[0] = 0;
	json_array_foreach (json_object_get(timeline_json(tl), "findings"), i, f)
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", i ? "," : "",
				      json_string_value(json_object_get(f, "id")));
	return buf;
}

static json_t *first(struct timeline *tl)
{
	return json_array_get(json_object_get(timeline_json(tl), "findings"), 0);
}

/* a peer at 127.0.0.9:443 that took requests and never answered */
#define SILENT_NET(role, host)                                                                     \
	"[{\"peer\": \"127.0.0.9:443\", \"port\": 443, \"connects\": 2, \"failures\": 0, "         \
	"\"errno\": null, \"bytes_in\": 0, \"bytes_out\": 600, \"first_ms\": 100, \"last_ms\": "   \
	"2100, \"host\": " host ", \"role\": \"" role "\"}]"
#define SILENT_CONNECTS                                                                            \
	"[{\"peer\": \"127.0.0.9:443\", \"family\": 2, \"port\": 443, \"pid\": 100, "              \
	"\"start_ms\": 100, \"dur_ms\": 0.1, \"ret\": 0, \"pending\": false, \"result\": "         \
	"\"connected\"}, {\"peer\": \"127.0.0.9:443\", \"family\": 2, \"port\": 443, \"pid\": "    \
	"100, \"start_ms\": 1100, \"dur_ms\": 0.1, \"ret\": 0, \"pending\": false, \"result\": "   \
	"\"connected\"}]"

static void test_silent_peer_by_role(void **state)
{
	char b[256];
	struct timeline *tl = model(SILENT_NET("other", "\"api.gradio.app\""), SILENT_CONNECTS);

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), ""); /* an analytics host */
	timeline_free(tl);
	tl = model(SILENT_NET("hub", "\"huggingface.co\""), SILENT_CONNECTS);
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-unreachable");
	assert_true(strstr(json_string_value(json_object_get(first(tl), "message")),
			   "huggingface.co:443: 2 connection attempts, silently dropped"));
	/* the fixture had every file cached */
	assert_non_null(
	    strstr(json_string_value(json_object_get(first(tl), "fix")), "HF_HUB_OFFLINE=1"));
	timeline_free(tl);
	/* nothing downloading: the metadata's timeout */
	tl = model(SILENT_NET("hub", "\"huggingface.co\""), SILENT_CONNECTS);
	no_files(tl);
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-unreachable");
	assert_non_null(
	    strstr(json_string_value(json_object_get(first(tl), "fix")), "HF_HUB_ETAG_TIMEOUT"));
	timeline_free(tl);
	/* a timeline older than roles: any silent peer, as before */
	tl = model(SILENT_NET("other", "null"), SILENT_CONNECTS);
	json_object_del(json_array_get(json_object_get(timeline_json(tl), "network"), 0), "role");
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-unreachable");
	timeline_free(tl);
}

static void test_probe_is_no_failure(void **state)
{
	char b[256];
	struct timeline *tl = model(
	    "[{\"peer\": \"127.0.0.4:443\", \"port\": 443, \"connects\": 1, \"failures\": 0, "
	    "\"errno\": null, \"bytes_in\": 0, \"bytes_out\": 0, \"host\": \"modelscope.cn\", "
	    "\"role\": \"modelscope\"}]",
	    "[{\"peer\": \"127.0.0.4:443\", \"family\": 2, \"port\": 443, \"pid\": 100, "
	    "\"start_ms\": 100, \"dur_ms\": 0.1, \"ret\": 0, \"pending\": false, \"result\": "
	    "\"connected\", \"bytes_in\": 0, \"bytes_out\": 0, \"writes\": 0, \"reply_max\": 0}]");

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
}

#define SWITCH_NET                                                                                 \
	"[{\"peer\": \"127.0.0.2:443\", \"port\": 443, \"connects\": 1, \"failures\": 0, "         \
	"\"errno\": null, \"bytes_in\": 0, \"bytes_out\": 0, \"host\": \"huggingface.co\", "       \
	"\"role\": \"hub\"}, {\"peer\": \"127.0.0.4:443\", \"port\": 443, \"connects\": 3, "       \
	"\"failures\": 0, \"errno\": null, \"bytes_in\": 900000, \"bytes_out\": 3000, \"host\": "  \
	"\"www.modelscope.cn\", \"role\": \"modelscope\", \"first_ms\": 400, \"last_ms\": 900}]"
#define SWITCH_CONNECTS                                                                            \
	"[{\"peer\": \"127.0.0.2:443\", \"family\": 2, \"port\": 443, \"pid\": 100, "              \
	"\"start_ms\": 100, \"dur_ms\": 0.1, \"ret\": 0, \"pending\": false, \"result\": "         \
	"\"closed-by-caller\", \"ms_to_result\": 300}]"

static void test_hub_probe_failed(void **state)
{
	char b[256];
	struct timeline *tl = model(SWITCH_NET, SWITCH_CONNECTS);
	json_t *f;

	(void)state;
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-probe-failed");
	f = first(tl);
	assert_string_equal(json_string_value(json_object_get(f, "severity")), "warning");
	assert_string_equal(json_string_value(json_object_get(f, "message")),
			    "huggingface.co unreachable (ETIMEDOUT): IndexTTS2 switched to "
			    "ModelScope; USE_MODELSCOPE=true skips the 3 s probe");
	timeline_free(tl);
	/* USE_MODELSCOPE decided: no probe was made by choice; nothing to say */
	tl = model(SWITCH_NET, SWITCH_CONNECTS);
	set_env(tl, "USE_MODELSCOPE", "true");
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-unreachable");
	timeline_free(tl);
}

#define TLS_CONNECTS(writes, reply)                                                                \
	"[{\"peer\": \"127.0.0.9:443\", \"family\": 2, \"port\": 443, \"pid\": 100, "              \
	"\"start_ms\": 100, \"dur_ms\": 0.1, \"ret\": 0, \"pending\": false, \"result\": "         \
	"\"connected\", \"tls\": true, \"bytes_in\": 1710, \"bytes_out\": 700, "                   \
	"\"writes\": " #writes ", \"reply_max\": " #reply "}]"
#define TLS_NET                                                                                    \
	"[{\"peer\": \"127.0.0.9:443\", \"port\": 443, \"connects\": 1, \"failures\": 0, "         \
	"\"errno\": null, \"bytes_in\": 1710, \"bytes_out\": 700, \"host\": "                      \
	"\"cas-bridge.xethub.hf.co\", \"role\": \"cas\"}]"

static void test_tls_handshake_is_no_answer(void **state)
{
	char b[256];
	struct timeline *tl = model(TLS_NET, TLS_CONNECTS(3, 510)); /* session tickets only */

	(void)state;
	no_files(tl);
	assert_string_equal(ids(tl, b, sizeof(b)), "hub-unreachable");
	/* a CAS with Xet on: Xet's advice */
	assert_non_null(
	    strstr(json_string_value(json_object_get(first(tl), "fix")), "HF_HUB_DISABLE_XET=1"));
	timeline_free(tl);
	tl = model(TLS_NET, TLS_CONNECTS(3, 811)); /* an answer */
	set_env(tl, "HF_ENDPOINT", NULL);	   /* no mirror to bypass */
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
	tl = model(TLS_NET, TLS_CONNECTS(2, 0)); /* a handshake, no request */
	set_env(tl, "HF_ENDPOINT", NULL);
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
}

static void test_mirror_bypassed(void **state)
{
	char b[256];
	const char *net = "[{\"peer\": \"127.0.0.3:443\", \"port\": 443, \"connects\": 4, "
			  "\"failures\": 0, \"errno\": null, \"bytes_in\": 3145728, "
			  "\"bytes_out\": 9000, \"host\": \"cas-bridge.xethub.hf.co\", "
			  "\"role\": \"cas\"}]";
	struct timeline *tl = model(net, "[]");

	(void)state;
	set_env(tl, "HF_ENDPOINT", "https://hf-mirror.com");
	assert_string_equal(ids(tl, b, sizeof(b)), "mirror-bypassed");
	assert_string_equal(json_string_value(json_object_get(first(tl), "message")),
			    "HF_ENDPOINT=https://hf-mirror.com is a mirror, but 3.0 MiB of Xet "
			    "downloads came from cas-bridge.xethub.hf.co:443: Xet fetches from the "
			    "CAS the hub names, not through the mirror");
	timeline_free(tl);
	tl = model(net, "[]");
	set_env(tl, "HF_ENDPOINT", "https://hf-mirror.com");
	set_env(tl, "HF_HUB_DISABLE_XET", "1");
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
	tl = model(net, "[]");
	set_env(tl, "HF_ENDPOINT", "https://huggingface.co");
	assert_string_equal(ids(tl, b, sizeof(b)), "");
	timeline_free(tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_silent_peer_by_role),
	    cmocka_unit_test(test_probe_is_no_failure),
	    cmocka_unit_test(test_hub_probe_failed),
	    cmocka_unit_test(test_tls_handshake_is_no_answer),
	    cmocka_unit_test(test_mirror_bypassed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
