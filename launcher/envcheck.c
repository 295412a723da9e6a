/* envcheck: nearest known variable name by edit distance (see envcheck.h). */
#include "envcheck.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* What huggingface_hub, transformers, ModelScope, IndexTTS2, Gradio and
 * PyTorch read from the environment (their docs), the ones an [env] of
 * tts-launch.ini is likely to set. */
static const char *const known[] = {
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_ENDPOINT",
    "HF_HUB_OFFLINE",
    "HF_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_SYMLINKS_WARNING",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "HF_HUB_DISABLE_EXPERIMENTAL_WARNING",
    "HF_HUB_VERBOSITY",
    "HF_HUB_DISABLE_XET",
    "HF_XET_CACHE",
    "HF_XET_HIGH_PERFORMANCE",
    "HF_ASSETS_CACHE",
    "HF_DATASETS_CACHE",
    "HF_DATASETS_OFFLINE",
    "HF_DEBUG",
    "HUGGINGFACE_HUB_CACHE",
    "HUGGING_FACE_HUB_TOKEN",
    "TRANSFORMERS_CACHE",
    "TRANSFORMERS_OFFLINE",
    "USE_MODELSCOPE",
    "MODELSCOPE_CACHE",
    "MODELSCOPE_DOMAIN",
    "TORCH_HOME",
    "CUDA_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TOKENIZERS_PARALLELISM",
    "GRADIO_SERVER_NAME",
    "GRADIO_SERVER_PORT",
    "GRADIO_ANALYTICS_ENABLED",
    "GRADIO_TEMP_DIR",
    "XDG_CACHE_HOME",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "OMP_NUM_THREADS",
};

/* Optimal string alignment distance (insert, delete, substitute, swap two
 * neighbours), case-insensitive, given up past max. */
static int distance(const char *a, const char *b, int max)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	int d[64][64];

	if (la >= 64 || lb >= 64 || (la > lb ? la - lb : lb - la) > max)
		return max + 1;
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++) {
		for (int j = 1; j <= lb; j++) {
			int cost =
			    toupper((unsigned char)a[i - 1]) != toupper((unsigned char)b[j - 1]);
			int v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 &&
			    toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 2]) &&
			    toupper((unsigned char)a[i - 2]) == toupper((unsigned char)b[j - 1]) &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

const char *envcheck_suggest(const char *name)
{
	const char *best = NULL;
	int best_d, len;

	if (!name)
		return NULL;
	len = (int)strlen(name);
	/* short names are too easily near something: 1 edit up to 8
	 * characters, 2 beyond */
	best_d = len <= 8 ? 1 : 2;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		int d;

		if (!strcmp(name, known[i]))
			return NULL; /* spelt right */
		d = distance(name, known[i], best_d);
		/* a different case only is a misspelling too (hf_home) */
		if (d <= best_d && (d < best_d || !best)) {
			best = known[i];
			best_d = d;
		}
	}
	return best;
}

const char *envcheck_client_setting(size_t i)
{
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
		if (strstr(known[k], "TOKEN") || !strcmp(known[k], "PYTHONPATH"))
			continue;
		if (i-- == 0)
			return known[k];
	}
	return NULL;
}
