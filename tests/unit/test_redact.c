/* redact.c: which names are secret, what is hidden in text, argv, env
 * entries and JSON, and that the timeline model never holds a secret, built
 * or loaded, while the config (what the service gets) keeps the values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "redact.h"
#include "render_prom.h"
#include "spawn.h"
#include "timeline.h"
#include "timeline_internal.h"

static bool secret(const char *name) { return redact_is_secret_name(name, strlen(name)); }

static void test_secret_names(void **state)
{
	static const char *const yes[] = {
	    "HF_TOKEN",
	    "HUGGING_FACE_HUB_TOKEN",
	    "MY_API_KEY",
	    "APIKEY",
	    "api_key",
	    "PGPASSWORD",
	    "DB_PASS",
	    "DB_PASSWD",
	    "AWS_SECRET_ACCESS_KEY",
	    "GOOGLE_APPLICATION_CREDENTIALS",
	    "hf-token",
	    "authToken",
	    "apiKeyFile",
	    "HTTP_AUTHORIZATION",
	    "OAUTH2",
	    "SSH_PASSPHRASE",
	    "TOKENS",
	    "env.MY_API_KEY",
	};
	static const char *const no[] = {
	    "KEYBOARD_LAYOUT",
	    "TOKENIZERS_PARALLELISM",
	    "AUTHOR",
	    "PASSTHROUGH",
	    "HF_ENDPOINT",
	    "HF_HOME",
	    "HOME",
	    "PATH",
	    "PWD",
	    "PYTHONPATH",
	    "HF_HUB_OFFLINE",
	    "",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!secret(yes[i]))
			fail_msg("%s should be secret", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (secret(no[i]))
			fail_msg("%s should not be secret", no[i]);
	/* only the first len bytes count */
	assert_false(redact_is_secret_name("HOME_TOKEN", 4));
	assert_false(redact_is_secret_name(NULL, 0));
}

static void text_is(const char *in, const char *want)
{
	char *got = redact_text(in), *again;

	assert_non_null(got);
	assert_string_equal(got, want);
	/* redacting twice changes nothing (loading a redacted timeline) */
	again = redact_text(got);
	assert_string_equal(again, want);
	free(again);
	free(got);
}

static void test_text(void **state)
{
	(void)state;
	/* URL userinfo: user:pass and a bare token; the host stays */
	text_is("https://user:pw@127.0.0.1:1/x", "https://***@127.0.0.1:1/x");
	text_is("HF_ENDPOINT=https://hf_tok@hub.example:443",
		"HF_ENDPOINT=https://***@hub.example:443");
	text_is("mirror at http://u:p@ss@host/ then", "mirror at http://***@host/ then");
	/* an @ in the path is not userinfo */
	text_is("http://host/a@b", "http://host/a@b");
	text_is("no url: a@b", "no url: a@b");
	/* NAME=VALUE with a secret name, in text and as a query parameter */
	text_is("HF_TOKEN=hf_abc rest", "HF_TOKEN=*** rest");
	text_is("env.MY_API_KEY=k123", "env.MY_API_KEY=***");
	text_is("https://h/p?token=abc&x=1", "https://h/p?token=***&x=1");
	text_is("--hf-token=xyz", "--hf-token=***");
	text_is("--set=env.HF_TOKEN=a=b c", "--set=env.HF_TOKEN=*** c");
	text_is("HF_TOKEN=", "HF_TOKEN=");
	text_is("KEYBOARD_LAYOUT=us TOKENIZERS_PARALLELISM=false",
		"KEYBOARD_LAYOUT=us TOKENIZERS_PARALLELISM=false");
	/* a separate option value, as in [app] args */
	text_is("--token abc --port 7860", "--token *** --port 7860");
	text_is("--model_dir ckpt --api-key  k-1", "--model_dir ckpt --api-key  ***");
	text_is("--token --port 7860", "--token --port 7860");
	text_is("--token", "--token");
	text_is("--port 7860 webui.py", "--port 7860 webui.py");
	text_is("", "");
	assert_null(redact_text(NULL));
}

static void cut_is(const char *in, const char *want)
{
	char *got = redact_text_cut(in);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* the tracer's argv, cut at 127 bytes */
static void test_text_cut(void **state)
{
	(void)state;
	cut_is("https://user:pa", "https://***");
	cut_is("--endpoint=https://us", "--endpoint=https://***");
	cut_is("https://user:pw@hub.exam", "https://***");
	/* complete enough: the host part ended */
	cut_is("https://user:pw@hub/pa", "https://***@hub/pa");
	cut_is("https://hub/x https://h2/y", "https://hub/x https://h2/y");
	cut_is("webui.py", "webui.py");
}

static void entry_is(const char *in, const char *want)
{
	char *got = redact_env_entry(in);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_env(void **state)
{
	char *v;

	(void)state;
	entry_is("HF_TOKEN=hf_secretvalue123", "HF_TOKEN=***");
	/* the whole value goes, spaces and '=' included */
	entry_is("MY_PASSWORD=a b=c", "MY_PASSWORD=***");
	entry_is("HF_ENDPOINT=https://user:pw@127.0.0.1:1", "HF_ENDPOINT=https://***@127.0.0.1:1");
	entry_is("HF_TOKEN=", "HF_TOKEN=");
	entry_is("KEYBOARD_LAYOUT=us", "KEYBOARD_LAYOUT=us");
	entry_is("PATH=/usr/bin:/bin", "PATH=/usr/bin:/bin");
	v = redact_env_value("OPENAI_API_KEY", "sk-1");
	assert_string_equal(v, "***");
	free(v);
	v = redact_env_value("HOME", "/root");
	assert_string_equal(v, "/root");
	free(v);
}

static void test_argv(void **state)
{
	char *argv[] = {"python3", "webui.py",	 "--token", "abc",  "--hf-token=xyz", "--api-key",
			"-k1",	   "--password", "--port",  "7860", "HF_TOKEN=t",     NULL};
	const char *want[] = {"python3",	"webui.py",  "--token",	    "***",
			      "--hf-token=***", "--api-key", "***",	    "--password",
			      "--port",		"7860",	     "HF_TOKEN=***"};
	char **r = redact_argv(argv, -1);

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(r[i], want[i]);
	assert_null(r[sizeof(want) / sizeof(want[0])]);
	/* argc bounds it */
	redact_argv_free(r);
	r = redact_argv(argv, 3);
	assert_string_equal(r[2], "--token");
	assert_null(r[3]);
	redact_argv_free(r);
}

static void test_json(void **state)
{
	json_t *v = json_pack("{s:s, s:s, s:[s, s, s, s], s:{s:s, s:s}, s:i}", "HF_TOKEN", "t1",
			      "url", "https://a:b@h", "argv", "x", "--token", "t2", "y", "env",
			      "OPENAI_API_KEY", "t3", "KEYBOARD_LAYOUT", "us", "TOKEN_COUNT", 5);
	char *s;

	(void)state;
	redact_json(v);
	s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s,
			    "{\"HF_TOKEN\":\"***\",\"TOKEN_COUNT\":5,\"argv\":[\"x\",\"--token\","
			    "\"***\",\"y\"],\"env\":{\"KEYBOARD_LAYOUT\":\"us\","
			    "\"OPENAI_API_KEY\":\"***\"},\"url\":\"https://***@h\"}");
	free(s);
	json_decref(v);
}

static const char *const secrets[] = {
    "hf_secretvalue123", "user:pw", "k123", "tokabc", "xyz789", NULL};

static void assert_no_secret(json_t *root)
{
	char *s = json_dumps(root, JSON_COMPACT);

	assert_non_null(s);
	for (const char *const *p = secrets; *p; p++)
		if (strstr(s, *p))
			fail_msg("secret %s in %s", *p, s);
	free(s);
}

static void test_timeline_built(void **state)
{
	struct config c;
	char err[CONFIG_ERR_MAX];
	char *argv[] = {"tts-launch", "--set",	"env.MY_API_KEY=k123", "--",
			"python3",    "app.py", "--hf-token=xyz789",   NULL};
	char *cmd[] = {"python3", "app.py", "--hf-token=xyz789", "--token", "tokabc", NULL};
	char **envp;
	struct timeline *tl;
	json_t *cfg;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "app.dir=/tmp", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.HF_TOKEN=hf_secretvalue123", err, sizeof(err)), 0);
	assert_int_equal(
	    config_set(&c, "env.HF_ENDPOINT=https://user:pw@127.0.0.1:1", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.MY_API_KEY=k123", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "env.KEYBOARD_LAYOUT=us", err, sizeof(err)), 0);
	assert_int_equal(config_set(&c, "app.args=--token tokabc", err, sizeof(err)), 0);
	assert_int_equal(config_finish(&c, err, sizeof(err)), 0);
	tl = timeline_new(&c, 7, argv);
	assert_non_null(tl);
	timeline_set_process(tl, 42, cmd);
	assert_no_secret(timeline_json(tl));
	cfg = json_object_get(json_object_get(timeline_json(tl), "launcher"), "config");
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(json_object_get(cfg, "env"), "vars"), "HF_TOKEN")),
			    "***");
	/* what is not secret stays readable: diagnose still knows the hub */
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(json_object_get(cfg, "env"), "vars"),
					      "HF_ENDPOINT")),
	    "https://***@127.0.0.1:1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(json_object_get(cfg, "env"), "vars"),
					      "KEYBOARD_LAYOUT")),
	    "us");
	assert_string_equal(
	    json_string_value(json_array_get(
		json_object_get(json_object_get(timeline_json(tl), "process"), "command"), 4)),
	    "***");
	/* the service still gets the real values */
	envp = spawn_build_env(&c, (char *[]){NULL});
	{
		bool tok = false, ep = false;

		for (char **e = envp; *e; e++) {
			tok |= !strcmp(*e, "HF_TOKEN=hf_secretvalue123");
			ep |= !strcmp(*e, "HF_ENDPOINT=https://user:pw@127.0.0.1:1");
		}
		assert_true(tok && ep);
	}
	spawn_env_free(envp);
	timeline_free(tl);
	config_free(&c);
}

/* A timeline written before redaction existed: report, diagnose and compare
 * load it; the model they get has no secret. */
static void test_timeline_loaded(void **state)
{
	char path[] = "/tmp/test_redact_XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	char err[256];
	struct timeline *tl;

	(void)state;
	assert_non_null(f);
	fprintf(f,
		"{\"schema\": \"%s\", \"launcher\": {\"argv\": [\"tts-launch\", \"--set\", "
		"\"env.MY_API_KEY=k123\"], \"config\": {\"app\": {\"args\": \"--token tokabc\"}, "
		"\"env\": {\"vars\": {\"HF_TOKEN\": \"hf_secretvalue123\", \"HF_ENDPOINT\": "
		"\"https://user:pw@127.0.0.1:1\"}}}}, \"process\": {\"command\": [\"python3\", "
		"\"--hf-token\", \"xyz789\"]}, \"processes\": [{\"argv\": [\"sh\", "
		"\"--hf-token=xyz789\"]}]}\n",
		TIMELINE_SCHEMA);
	fclose(f);
	tl = timeline_load(path, err, sizeof(err));
	unlink(path);
	assert_non_null(tl);
	assert_no_secret(timeline_json(tl));
	timeline_free(tl);
}

/* /metrics and report --format prom: a label value never shows a secret */
static void test_prom_label(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	prom_label_value(f, "https://user:pw@hub/x?token=t1 \"q\"");
	fclose(f);
	assert_string_equal(buf, "\"https://***@hub/x?token=*** \\\"q\\\"\"");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_secret_names),   cmocka_unit_test(test_text),
	    cmocka_unit_test(test_text_cut),	   cmocka_unit_test(test_env),
	    cmocka_unit_test(test_argv),	   cmocka_unit_test(test_json),
	    cmocka_unit_test(test_timeline_built), cmocka_unit_test(test_timeline_loaded),
	    cmocka_unit_test(test_prom_label),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
