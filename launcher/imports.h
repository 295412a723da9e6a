/* imports: the timeline's `python` section. Imports come from the
 * interpreter's USDT probes when it has them; an interpreter built without
 * them (pyenv's default build, most non-distro Pythons) or [trace]
 * python_usdt = false gets imports derived from its module-file activity:
 * every .py/.pyc/.so it opened under site-packages, dist-packages or the
 * standard library, named as a module, timed from the first to the last
 * operation on its files, marked `"derived": true` (docs/timeline.md). */
#ifndef TTS_IMPORTS_H
#define TTS_IMPORTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The module a file loads ("email.parser" for
 * .../lib/python3.11/email/__pycache__/parser.cpython-311.pyc, "torch" for
 * .../site-packages/torch/__init__.py, "_decimal" for lib-dynload's
 * _decimal.cpython-311-x86_64-linux-gnu.so) in out; false when the path is
 * no module file of an interpreter's library. */
bool imports_module_of(const char *path, char *out, size_t len);

struct tl_sections;

/* The imports derived from s's files[], appended to its python.imports[]
 * records (sorted by start, timeline_sections.h); how many. */
size_t imports_derive(struct tl_sections *s);

/* Write root's `python` section: s's imports (the USDT ones) when there
 * are any, else the derived ones (and a tracing.fallbacks entry saying
 * so), and the interpreter (python.interpreter, interp.h). s: the model's
 * records (timeline_sections(tl)), with their placeholder. */
void imports_snapshot(json_t *root, struct tl_sections *s, bool usdt);

#endif
