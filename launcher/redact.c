/* redact: what counts as a secret and how it is hidden; the rule is
 * documented in redact.h, README.md and docs/timeline.md. */
#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redact.h"

/* Every word is tried at every position of a name: the order is free. */
static const char *const secret_words[] = {
    "AUTHORIZATION", "CREDENTIAL", "PASSPHRASE", "PASSWORD", "PASSWD",
    "SECRET",	     "TOKEN",	   "AUTH",	 "PASS",     "KEY",
};

/* The word that ends before name[j] is a whole word: the name ends, a
 * non-letter follows, or a camelCase word starts. */
static bool word_ends(const char *name, size_t len, size_t j)
{
	if (j >= len || !isalpha((unsigned char)name[j]))
		return true;
	return islower((unsigned char)name[j - 1]) && isupper((unsigned char)name[j]);
}

bool redact_is_secret_name(const char *name, size_t len)
{
	if (!name)
		return false;
	for (size_t p = 0; p < len; p++) {
		for (size_t w = 0; w < sizeof(secret_words) / sizeof(secret_words[0]); w++) {
			size_t wl = strlen(secret_words[w]), j = p + wl;

			if (wl > len - p || strncasecmp(name + p, secret_words[w], wl))
				continue;
			if (word_ends(name, len, j))
				return true;
			/* a plural: TOKENS, CREDENTIALS */
			if ((name[j] == 's' || name[j] == 'S') && word_ends(name, len, j + 1))
				return true;
		}
	}
	return false;
}

/* ---- a growing output string ---- */

struct out {
	char *p;
	size_t n, cap;
	bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->n + n + 1 > o->cap) {
		size_t cap = (o->n + n + 1) * 2;
		char *p = realloc(o->p, cap);

		if (!p) {
			o->oom = true;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
	o->p[o->n] = '\0';
}

static char *finish(struct out *o)
{
	if (o->oom) {
		free(o->p);
		return NULL;
	}
	if (!o->p)
		return strdup("");
	return o->p;
}

/* characters of a NAME in NAME=VALUE or of an --option */
static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

static bool space(char c) { return isspace((unsigned char)c); }

/* An option word (-x, --hf-token) of len bytes, without "=", whose value is
 * the next argument. */
static bool secret_option(const char *w, size_t len)
{
	size_t d = 0;

	while (d < len && w[d] == '-')
		d++;
	if (d == 0 || d == len)
		return false;
	for (size_t i = d; i < len; i++)
		if (!name_char(w[i]))
			return false;
	return redact_is_secret_name(w + d, len - d);
}

/* The argument after a secret option is a value to hide, unless it is the
 * next option. */
static bool option_value(const char *w) { return *w && strncmp(w, "--", 2); }

char *redact_text(const char *text)
{
	struct out o = {0};
	size_t i = 0, n;

	if (!text)
		return NULL;
	n = strlen(text);
	while (i < n) {
		char c = text[i];

		/* scheme://userinfo@host: the userinfo goes, the host stays (diagnose
		 * still tells which hub was asked) */
		if (c == ':' && !strncmp(text + i, "://", 3)) {
			size_t e = i + 3, at = 0;

			for (; e < n && !space(text[e]) && !strchr("/?#\"'", text[e]); e++)
				if (text[e] == '@')
					at = e;
			put(&o, "://", 3);
			if (at) {
				put(&o, REDACTED, strlen(REDACTED));
				i = at; /* the '@' and the host are copied below */
			} else {
				i += 3;
			}
			continue;
		}
		/* NAME=VALUE (also ?token=... in a URL): NAME is already copied */
		if (c == '=') {
			size_t s = i, e = i + 1;

			while (s > 0 && name_char(text[s - 1]))
				s--;
			if (s < i && redact_is_secret_name(text + s, i - s)) {
				while (e < n && !space(text[e]) && !strchr("&\"'", text[e]))
					e++;
				put(&o, "=", 1);
				if (e > i + 1)
					put(&o, REDACTED, strlen(REDACTED));
				i = e;
				continue;
			}
		}
		/* --token VALUE inside one string ([app] args = --token abc) */
		if (c == '-' && (i == 0 || space(text[i - 1]))) {
			size_t e = i, w;

			while (e < n && !space(text[e]))
				e++;
			for (w = e; w < n && space(text[w]); w++)
				;
			if (w < n && w > e && secret_option(text + i, e - i) &&
			    option_value(text + w)) {
				size_t v = w;

				while (v < n && !space(text[v]))
					v++;
				put(&o, text + i, w - i);
				put(&o, REDACTED, strlen(REDACTED));
				i = v;
				continue;
			}
		}
		put(&o, &c, 1);
		i++;
	}
	return finish(&o);
}

char *redact_text_cut(const char *text)
{
	char *r = redact_text(text), *url = NULL, *tail;

	for (char *p = r; p && (p = strstr(p, "://")); p += 3)
		url = p + 3;
	if (!url || url[strcspn(url, "/?#\"' \t\r\n")])
		return r;
	/* r ends inside a URL's host part: hide it */
	*url = '\0';
	tail = realloc(r, strlen(r) + strlen(REDACTED) + 1);
	if (!tail) {
		free(r);
		return NULL;
	}
	return strcat(tail, REDACTED);
}

char *redact_env_value(const char *name, const char *value)
{
	if (!value)
		return NULL;
	if (name && *value && redact_is_secret_name(name, strlen(name)))
		return strdup(REDACTED);
	return redact_text(value);
}

char *redact_env_entry(const char *entry)
{
	const char *eq = entry ? strchr(entry, '=') : NULL;
	struct out o = {0};
	char *v;

	if (!eq)
		return entry ? redact_text(entry) : NULL;
	put(&o, entry, (size_t)(eq - entry) + 1);
	if (eq[1] && redact_is_secret_name(entry, (size_t)(eq - entry))) {
		put(&o, REDACTED, strlen(REDACTED));
		return finish(&o);
	}
	v = redact_text(eq + 1);
	if (!v)
		o.oom = true;
	else
		put(&o, v, strlen(v));
	free(v);
	return finish(&o);
}

char **redact_argv(char *const *argv, int argc)
{
	char **out;
	int n = 0;

	if (argc < 0)
		while (argv && argv[n])
			n++;
	else
		n = argc;
	out = calloc((size_t)n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++) {
		const char *a = argv[i] ? argv[i] : "";
		bool hide = i > 0 && argv[i - 1] &&
			    secret_option(argv[i - 1], strlen(argv[i - 1])) && option_value(a);

		out[i] = hide ? strdup(REDACTED) : redact_text(a);
		if (!out[i]) {
			redact_argv_free(out);
			return NULL;
		}
	}
	return out;
}

void redact_argv_free(char **argv)
{
	for (char **a = argv; a && *a; a++)
		free(*a);
	free(argv);
}

/* Replace a JSON string's text, in place (shared references see it too). */
static void string_set(json_t *s, const char *text)
{
	if (strcmp(json_string_value(s), text))
		json_string_set(s, text);
}

/* Only strings that can hold a secret are copied: most timeline strings
 * (paths, names) have none of these. */
static bool may_hold_secret(const char *s)
{
	return strstr(s, "://") || strchr(s, '=') || strchr(s, '-');
}

static void redact_string(json_t *s)
{
	const char *v = json_string_value(s);
	char *r;

	if (!v || !may_hold_secret(v))
		return;
	r = redact_text(v);
	/* out of memory: better nothing than the secret */
	string_set(s, r ? r : REDACTED);
	free(r);
}

void redact_json(json_t *v)
{
	const char *key;
	json_t *m, *prev = NULL;
	size_t i;

	if (json_is_string(v)) {
		redact_string(v);
	} else if (json_is_object(v)) {
		json_object_foreach (v, key, m) {
			if (json_is_string(m) && *json_string_value(m) &&
			    redact_is_secret_name(key, strlen(key)))
				string_set(m, REDACTED);
			else
				redact_json(m);
		}
	} else if (json_is_array(v)) {
		json_array_foreach (v, i, m) {
			/* checked before prev is redacted itself: "--token" stays */
			if (json_is_string(m) && json_is_string(prev) &&
			    secret_option(json_string_value(prev),
					  strlen(json_string_value(prev))) &&
			    option_value(json_string_value(m)))
				string_set(m, REDACTED);
			else
				redact_json(m);
			prev = m;
		}
	}
}

void redact_timeline(json_t *root) { redact_json(root); }
