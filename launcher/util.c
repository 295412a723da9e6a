#include "util.h"

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
