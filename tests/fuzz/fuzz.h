/* What the fuzz targets share. The code under test reads its input by path
 * (iniparser_load, jansson's json_load_file), so each input is written to a
 * file first: a plain regular file, 0600, in a private directory made once per
 * process (on tmpfs when there is one), rewritten in place for every input and
 * removed at exit. Output goes to /dev/null: the renderers still format every
 * byte, nothing accumulates. */
#ifndef TTS_FUZZ_H
#define TTS_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_FILES 2

static struct {
	char dir[256];
	char path[FUZZ_FILES][300];
	int fd[FUZZ_FILES];
	FILE *null;
} fuzz;

static inline void fuzz_die(const char *what)
{
	fprintf(stderr, "fuzz: failed to %s: %s\n", what, strerror(errno));
	abort();
}

static inline void fuzz_cleanup(void)
{
	for (int i = 0; i < FUZZ_FILES; i++)
		if (fuzz.path[i][0])
			unlink(fuzz.path[i]);
	if (fuzz.dir[0])
		rmdir(fuzz.dir);
}

static inline void fuzz_init(void)
{
	struct stat st;
	const char *tmp = getenv("TMPDIR");

	if (fuzz.dir[0])
		return;
	if (!tmp || !*tmp)
		tmp = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
	snprintf(fuzz.dir, sizeof(fuzz.dir), "%s/tts-fuzz-XXXXXX", tmp);
	if (!mkdtemp(fuzz.dir))
		fuzz_die("create a private directory");
	atexit(fuzz_cleanup);
	for (int i = 0; i < FUZZ_FILES; i++) {
		snprintf(fuzz.path[i], sizeof(fuzz.path[i]), "%s/input%d", fuzz.dir, i);
		fuzz.fd[i] =
		    open(fuzz.path[i], O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fuzz.fd[i] < 0)
			fuzz_die("create an input file");
	}
	fuzz.null = fopen("/dev/null", "w");
	if (!fuzz.null)
		fuzz_die("open /dev/null");
}

/* The path of input file i, holding exactly the size bytes at data. */
static inline const char *fuzz_file(int i, const uint8_t *data, size_t size)
{
	size_t done = 0;

	fuzz_init();
	if (ftruncate(fuzz.fd[i], 0) < 0)
		fuzz_die("truncate an input file");
	while (done < size) {
		ssize_t n = pwrite(fuzz.fd[i], data + done, size - done, (off_t)done);

		if (n <= 0)
			fuzz_die("write an input file");
		done += (size_t)n;
	}
	return fuzz.path[i];
}

/* Where the output goes. */
static inline FILE *fuzz_out(void)
{
	fuzz_init();
	clearerr(fuzz.null);
	return fuzz.null;
}

#endif
