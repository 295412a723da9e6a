#include "util.h"

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
