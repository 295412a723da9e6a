/* attrib_native: user ips named by their mapping; see attrib_native.h. */
#include "attrib_native.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NATIVE_PIDS_MAX	 4096 /* processes whose mappings are kept */
#define NATIVE_NAMES_MAX 8192 /* distinct names */
#define REREAD_MS	 1000.0

struct range {
	__u64 lo, hi;
	int name;
};

struct pmaps {
	int pid;
	double read_ms; /* last read (a miss reads again after REREAD_MS) */
	struct range *r;
	size_t n;
};

struct attr_natives {
	struct pmaps *p;
	size_t n, cap;
	char **names;
	size_t n_names, cap_names;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct attr_natives *natives_new(void) { return calloc(1, sizeof(struct attr_natives)); }

void natives_free(struct attr_natives *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		free(n->p[i].r);
	for (size_t i = 0; i < n->n_names; i++)
		free(n->names[i]);
	free(n->p);
	free(n->names);
	free(n);
}

const char *natives_name(const struct attr_natives *n, int idx)
{
	return n && idx >= 0 && (size_t)idx < n->n_names ? n->names[idx] : NULL;
}

static int intern(struct attr_natives *n, const char *name)
{
	for (size_t i = n->n_names; i-- > 0;)
		if (!strcmp(n->names[i], name))
			return (int)i;
	if (n->n_names >= NATIVE_NAMES_MAX)
		return -1;
	if (n->n_names == n->cap_names) {
		size_t c = n->cap_names ? n->cap_names * 2 : 64;
		char **v = realloc(n->names, c * sizeof(*v));

		if (!v)
			return -1;
		n->names = v;
		n->cap_names = c;
	}
	n->names[n->n_names] = strdup(name);
	return n->names[n->n_names] ? (int)n->n_names++ : -1;
}

bool natives_parse_line(const char *line, __u64 *lo, __u64 *hi, bool *exec, char *name, size_t len)
{
	char perms[8];
	uint64_t a, b;
	int off = 0;
	const char *path, *base;

	/* "7f..-7f.. r-xp 00000000 08:01 1234    /usr/lib/libc.so.6" */
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s %n", &a, &b, perms, &off) < 3 ||
	    !off)
		return false;
	*lo = a;
	*hi = b;
	*exec = perms[2] == 'x';
	path = line + off;
	while (*path == ' ')
		path++;
	if (!*path || *path == '\n') {
		snprintf(name, len, "anonymous memory");
		return true;
	}
	base = *path == '[' ? path : strrchr(path, '/');
	base = base ? (*base == '/' ? base + 1 : base) : path;
	snprintf(name, len, "%.*s", (int)strcspn(base, "\n"), base);
	/* " (deleted)": the file was replaced since it was mapped */
	if (strlen(name) > 10 && !strcmp(name + strlen(name) - 10, " (deleted)"))
		name[strlen(name) - 10] = 0;
	return true;
}

static void read_maps(struct attr_natives *n, struct pmaps *m)
{
	char path[64], line[4352], name[256];
	size_t cap = 0;
	FILE *f;

	m->read_ms = now_ms();
	m->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", m->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		__u64 lo, hi;
		bool exec;
		int idx;

		if (!natives_parse_line(line, &lo, &hi, &exec, name, sizeof(name)) || !exec)
			continue;
		idx = intern(n, name);
		if (idx < 0)
			continue;
		if (m->n == cap) {
			size_t c = cap ? cap * 2 : 64;
			struct range *r = realloc(m->r, c * sizeof(*r));

			if (!r)
				break;
			m->r = r;
			cap = c;
		}
		m->r[m->n++] = (struct range){lo, hi, idx};
	}
	fclose(f);
}

static struct pmaps *pmaps_of(struct attr_natives *n, int pid)
{
	for (size_t i = 0; i < n->n; i++)
		if (n->p[i].pid == pid)
			return &n->p[i];
	if (n->n >= NATIVE_PIDS_MAX)
		return NULL;
	if (n->n == n->cap) {
		size_t c = n->cap ? n->cap * 2 : 16;
		struct pmaps *v = realloc(n->p, c * sizeof(*v));

		if (!v)
			return NULL;
		n->p = v;
		n->cap = c;
	}
	n->p[n->n] = (struct pmaps){.pid = pid, .read_ms = -1e18};
	return &n->p[n->n++];
}

/* the range holding ip (ranges are in address order, as maps lists them) */
static int find(const struct pmaps *m, __u64 ip)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ip < m->r[mid].lo)
			hi = mid;
		else if (ip >= m->r[mid].hi)
			lo = mid + 1;
		else
			return m->r[mid].name;
	}
	return -1;
}

int natives_lookup(struct attr_natives *n, int pid, __u64 ip)
{
	struct pmaps *m = n ? pmaps_of(n, pid) : NULL;
	int idx;

	if (!m)
		return -1;
	idx = find(m, ip);
	if (idx < 0 && now_ms() - m->read_ms >= REREAD_MS) {
		read_maps(n, m);
		idx = find(m, ip);
	}
	return idx;
}
