#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

double jnum(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

const char *jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

bool str_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

bool path_under(const char *path, const char *dir)
{
	size_t n = dir ? strlen(dir) : 0;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return n && !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

void fmt_bytes(char *buf, size_t len, double b)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void path_resolve(const char *base, const char *path, char *out, size_t len)
{
	char tmp[PATH_MAX * 2], *parts[512], *save = NULL, *tok;
	size_t n = 0, o = 0;

	if (!path) {
		snprintf(out, len, "?");
		return;
	}
	if (path[0] == '/' || !base || !*base)
		snprintf(tmp, sizeof(tmp), "%s", path);
	else
		snprintf(tmp, sizeof(tmp), "%s/%s", base, path);
	for (tok = strtok_r(tmp, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..")) {
			if (n)
				n--;
			continue;
		}
		if (n < sizeof(parts) / sizeof(parts[0]))
			parts[n++] = tok;
	}
	out[0] = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++) {
		int w = snprintf(out + o, len - o, "/%s", parts[i]);

		if (w < 0 || (size_t)w >= len - o)
			break;
		o += (size_t)w;
	}
	if (!n)
		snprintf(out, len, "/");
}

const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path ? path : "?";
}
