/* envcheck: a variable set in [env] whose name looks like a misspelled
 * Hugging Face, IndexTTS2 or PyTorch setting (HF_HUB_CAHCE): the nearest
 * known name, so that a typo is said instead of silently ignored by the
 * library that would have read it. */
#ifndef TTS_ENVCHECK_H
#define TTS_ENVCHECK_H

#include <stddef.h>

/* The known name name is most likely a misspelling of, or NULL (name is
 * known, or nothing known is close: an app's own variable). */
const char *envcheck_suggest(const char *name);

/* The i-th of the settings the service's clients read (huggingface_hub,
 * ModelScope, IndexTTS2, PyTorch, Gradio: the known names above), that run
 * copies from its own environment into [env] so the timeline records what
 * the service saw; secrets (tokens) and PYTHONPATH (run builds it) left
 * out. NULL past the last. */
const char *envcheck_client_setting(size_t i);

#endif
