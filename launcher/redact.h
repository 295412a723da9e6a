/* redact: the one rule for what tts-launch never writes or prints where
 * others can read it (the timeline, every report, --print-env, /metrics,
 * its own lines in the log). The service still gets the real values.
 *
 * A name is secret when it contains SECRET, TOKEN, KEY, PASSWORD, PASSWD,
 * PASSPHRASE, PASS, CREDENTIAL, AUTH or AUTHORIZATION (any case) and the
 * character after that word is not a letter: the end, '_', '-', '.', a
 * digit, a plural 's' ending the word, or a capital starting a camelCase
 * word. So HF_TOKEN, MY_API_KEY, APIKEY, PGPASSWORD, DB_PASS,
 * AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS, --hf-token and
 * authToken are secret; KEYBOARD_LAYOUT, TOKENIZERS_PARALLELISM, AUTHOR and
 * PASSTHROUGH are not. Over-matching (MONKEY_PATCH) only hides a value.
 *
 * What is replaced by "***" (docs/timeline.md, README.md):
 * - the value of a variable, member or NAME=VALUE pair with a secret name
 *   (also a URL's ?token=...),
 * - URL userinfo, anywhere: the user:pass of https://user:pass@host
 *   becomes *** (the host stays),
 * - the argument after a separate secret option: --token abc -> --token ***
 *   (unless it starts with "--"). */
#ifndef TTS_REDACT_H
#define TTS_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#define REDACTED "***"

/* The first len bytes of name name a secret (the rule above). */
bool redact_is_secret_name(const char *name, size_t len);

/* A copy of text with its secrets replaced (URL userinfo, NAME=VALUE pairs
 * with a secret name, the word after a secret --option). NULL only when out
 * of memory. */
char *redact_text(const char *text);

/* redact_text for a string cut short (the tracer keeps an exec's first 127
 * bytes of argv): a URL whose host part runs to the cut may be a userinfo
 * whose '@' was cut off, so that part is "***" too. */
char *redact_text_cut(const char *text);

/* The value of variable name as it may be shown: "***" when name is secret
 * (an empty value stays empty), else redact_text(value). NULL: no memory. */
char *redact_env_value(const char *name, const char *value);

/* "NAME=VALUE" as it may be shown. NULL: no memory. */
char *redact_env_entry(const char *entry);

/* argv as it may be shown: a new NULL-terminated vector (free with
 * redact_argv_free) of argc strings (argc < 0: up to argv's NULL), each
 * through redact_text, with the argument after a separate secret option
 * replaced. NULL: no memory. */
char **redact_argv(char *const *argv, int argc);
void redact_argv_free(char **argv);

/* In place, any JSON value: every string through redact_text, the string
 * value of every member with a secret name, and in an array the string
 * after a separate secret option. Idempotent. */
/* (struct json_t is jansson's json_t: declared so that modules compiled
 * without jansson, the renderers, may include this for redact_text) */
struct json_t;
void redact_json(struct json_t *v);

/* A timeline model (docs/timeline.md), at construction or after loading an
 * older file: redact_json over the whole tree. */
void redact_timeline(struct json_t *root);

#endif
