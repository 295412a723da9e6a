/* config_file: read a config file whole and check it (a regular file of at
 * most CONFIG_MAX_BYTES, as root one only root owns and can write; UTF-8
 * text, no duplicate keys, no [env:NAME] sections, balanced quotes, names
 * and lines within the limits), then parse exactly those bytes with
 * iniparser. config.c applies the result. */
#ifndef TTS_CONFIG_FILE_H
#define TTS_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include <iniparser.h>

/* The file's bytes, NUL-terminated (*len of them), malloc'd; NULL with the
 * reason in err. as_root: also refuse a file root does not own, or that
 * others can write, or a link another user owns. */
char *config_file_read(const char *file, bool as_root, size_t *len, char *err, size_t errlen);

/* Check buf (the file's bytes) and parse it; NULL with the reason in err. */
dictionary *config_file_parse(const char *file, const char *buf, size_t len, char *err,
			      size_t errlen);

#endif
