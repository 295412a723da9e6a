/* Fuzz target: the config parser. The input is an INI file for
 * config_load_file; each of its lines is also given to config_set as a
 * --set SECTION.KEY=VALUE argument, after the file (as main does) or on the
 * defaults when the file was refused. A config that loads is then finished
 * and turned into the service's argv and the timeline's JSON, as a start
 * would. Any crash, sanitizer report or hang is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config.h"
#include "fuzz.h"

#define FUZZ_MAX_INPUT (64 << 10)
#define MAX_SETS       64

static void apply_sets(struct config *c, const uint8_t *data, size_t size)
{
	char err[CONFIG_ERR_MAX], *text = malloc(size + 1), *line, *save = NULL;
	int n = 0;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	for (line = strtok_r(text, "\n", &save); line && n < MAX_SETS;
	     line = strtok_r(NULL, "\n", &save), n++)
		config_set(c, line, err, sizeof(err));
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[CONFIG_ERR_MAX];
	struct config c;

	if (size > FUZZ_MAX_INPUT)
		return -1;
	config_defaults(&c);
	if (config_load_file(&c, fuzz_file(0, data, size), err, sizeof(err)) < 0) {
		config_free(&c);
		config_defaults(&c);
	}
	apply_sets(&c, data, size);
	if (config_finish(&c, err, sizeof(err)) == 0) {
		char **argv = config_service_argv(&c);
		json_t *j = config_to_json(&c);

		for (char **a = argv; a && *a; a++)
			free(*a);
		free(argv);
		json_decref(j);
	}
	config_free(&c);
	return 0;
}
