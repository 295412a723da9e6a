/* classify: a file's class in the timeline (model, download, xet_cache,
 * hf_cache, python, library, config, system, other: docs/timeline.md) from its path,
 * and the one table of model-weight suffixes, which the BPF side gets as
 * rodata (targ_model_suf/targ_model_mask: which mapped files' faults count
 * as model faults) and [mlock] patterns as its default globs (the mlock
 * shim's mode = models). */
#ifndef TTS_CLASSIFY_H
#define TTS_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ".pth", ".safetensors", ...; NULL-terminated. */
extern const char *const classify_model_suffixes[];

/* path (or a bare file name) ends like model weights. */
bool classify_model_suffix(const char *path);

/* The suffixes as file-name globs, "*.pth *.pt *.safetensors ...": the
 * default of [mlock] patterns. Writes at most len bytes (NUL included);
 * returns the length the whole list needs, as snprintf. */
size_t classify_model_globs(char *out, size_t len);

/* The class of path; cache_dirs (NULL-terminated, may be NULL) are the hub
 * caches: files under them are "hf_cache" unless a finer class applies. */
const char *classify_file(const char *path, const char *const *cache_dirs);

/* The model suffixes as the BPF side compares them: a name's last 8 bytes
 * read as a big-endian number t match suffix i when (t & mask[i]) ==
 * val[i] (a suffix over 8 bytes: its last 8). Fills at most max entries,
 * the rest zero (mask 0: unused); returns how many suffixes there are. */
int classify_model_keys(uint64_t *val, uint64_t *mask, int max);

#endif
