/* progress: live download progress and stall detection over the timeline
 * model (progress.h). Everything here reads the model the supervisor
 * snapshots about once a second; nothing reaches into the tracer. What a
 * stalled start waits on is stall.c's. */
#include "progress.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "diagnose.h"
#include "dlsize.h"
#include "hfcache.h"
#include "stall.h"
#include "timeline_internal.h" /* tl_view_decode_tree: the display samples the raw tree */
#include "util.h"

#define RATE_SAMPLES	8 /* rate over the last samples (about 5 s at 1 Hz) */
#define RATE_WINDOW_MS	5000.0
#define ACTIVE_MS	3000.0 /* a file counts as being written this long after it grew */
#define FAULTS_PROGRESS 64     /* page faults per sample that count as work (mmap loads) */
#define MAX_STALLS	64

struct pfile {
	char *path;
	char name[300]; /* repo/file, or the path shortened */
	double bytes;
	double t[RATE_SAMPLES], b[RATE_SAMPLES];
	int n, head;
	double first_seen, last_grow, last_logged;
	double net0;	       /* network bytes in when first seen */
	double first_ms;       /* opened (the model's first_ms) */
	bool download;	       /* a *.incomplete blob */
	bool done;	       /* its completion was said */
	bool waited;	       /* complete, its snapshot link not seen: said next sample */
	double expected;       /* the download's expected size (downloads[]), 0: unknown */
	enum dlsize_from from; /* ... where it came from (dlsize.h) */
	bool known_dropped;    /* a known size this file contradicted: never used again */
	bool offsets;	       /* written at offsets (Xet): its distinct bytes are its progress */
	double final_size;     /* renamed: the kernel's size of the file, 0: not seen */
	bool named;	       /* the name is the timeline's (downloads[].name) */
	bool stall_said;       /* its stalled line was said (again when it moves) */
};

struct progress {
	struct progress_opts o;
	struct pfile *files;
	size_t n_files, cap_files;
	json_t *peers;	/* {peer: {in, out, t_in, t_out}} */
	json_t *conns;	/* the same by connection (stall_conn_key) */
	json_t *stalls; /* reported stalls, for the timeline */
	json_t *copies; /* copies said: {path: bytes} */
	json_t *held;	/* copies not said yet for want of their paths: {path: samples} */
	double sig;	/* progress signature: changes when anything moves */
	double faults;
	double last_progress;
	double next_stall; /* ms of the next stall message; 0: not stalled */
	bool stalled;
	bool line_shown;
	int samples;
	double snap_total, snap_max;
	int n_snaps;
};

struct progress *progress_new(const struct progress_opts *o)
{
	struct progress *p;

	if (o->mode == PROGRESS_OFF && o->stall_s <= 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->o = *o;
	if (p->o.log_every_s <= 0)
		p->o.log_every_s = 5;
	if (p->o.mode == PROGRESS_AUTO)
		p->o.mode = PROGRESS_LOG;
	if (p->o.mode == PROGRESS_TTY && !p->o.tty)
		p->o.mode = PROGRESS_LOG;
	p->peers = json_object();
	p->conns = json_object();
	p->stalls = json_array();
	p->copies = json_object();
	p->held = json_object();
	p->last_progress = -1;
	return p;
}

void progress_free(struct progress *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_files; i++)
		free(p->files[i].path);
	free(p->files);
	json_decref(p->peers);
	json_decref(p->conns);
	json_decref(p->stalls);
	json_decref(p->copies);
	json_decref(p->held);
	free(p);
}

void progress_snapshot_cost(struct progress *p, double ms)
{
	if (!p)
		return;
	p->snap_total += ms;
	p->n_snaps++;
	if (ms > p->snap_max)
		p->snap_max = ms;
}

/* ---- naming a download ---- */

/* The timeline's entry for the download whose temp (or final) path is
 * path, or NULL */
static const struct tl_download *dl_entry(const struct tl_view *v, const char *path)
{
	for (size_t i = 0; i < v->n_downloads; i++) {
		const struct tl_download *d = &v->downloads[i];

		if ((d->path && !strcmp(d->path, path)) ||
		    (d->final_path && !strcmp(d->final_path, path)))
			return d;
	}
	return NULL;
}

bool progress_download_name(const struct tl_view *v, const char *path, double first_ms, char *out,
			    size_t len)
{
	char repo[256], folder[PATH_MAX], best[PATH_MAX] = "";
	double best_ms = -1;
	const struct tl_download *d = dl_entry(v, path);
	size_t i;

	/* the timeline names every download (hfcache.c's rules, final once
	 * renamed or linked) */
	if (d && d->name) {
		snprintf(out, len, "%s", d->name);
		return d->complete && (d->link || strcmp(d->writer ?: "", "hub_cache"));
	}
	if (!hf_repo_id(path, repo, sizeof(repo)) || !*repo) {
		const char *b = strrchr(path, '/');

		snprintf(out, len, "%s", b ? b + 1 : path);
		return false;
	}
	hf_snapshots_dir(path, folder, sizeof(folder));
	/* once downloaded, the snapshot's link to the blob names it exactly */
	for (i = 0; i < v->n_symlinks; i++) {
		const char *q = v->symlinks[i].path, *r = v->symlinks[i].resolved;
		size_t n = hf_hub_temp_stem(path);

		if (q && r && !strncmp(q, folder, strlen(folder)) && strlen(r) == n &&
		    !strncmp(r, path, n) && tl_or0(v->symlinks[i].result) == 0) {
			const char *f = hf_snapshot_file(q);

			snprintf(out, len, "%s:%s", repo, f ? f : q + strlen(folder));
			return true;
		}
	}
	/* before that, a guess: huggingface_hub checks snapshots/COMMIT/FILE
	 * just before it takes the lock and opens the blob, so the last such
	 * probe names the file (a sample can see it before the probe's entry) */
	for (i = 0; i < v->n_missing; i++) {
		const char *q = v->missing[i].path;
		/* the pointer is probed again after the download: its first failure */
		double t = tl_or0(v->missing[i].first_ms);

		if (!q || strncmp(q, folder, strlen(folder)) || t > first_ms + 1 || t < best_ms)
			continue;
		best_ms = t;
		snprintf(best, sizeof(best), "%s", q + strlen(folder));
	}
	if (*best) {
		const char *f = strchr(best, '/'); /* past COMMIT/ */

		snprintf(out, len, "%s:%s", repo, f ? f + 1 : best);
	} else {
		const char *b = strrchr(path, '/');

		snprintf(out, len, "%s:%.12s...", repo, b ? b + 1 : path);
	}
	return false;
}

/* ---- progress ---- */

static struct pfile *file_get(struct progress *p, const char *path)
{
	for (size_t i = 0; i < p->n_files; i++)
		if (!strcmp(p->files[i].path, path))
			return &p->files[i];
	if (p->n_files == p->cap_files) {
		size_t cap = p->cap_files ? p->cap_files * 2 : 16;
		struct pfile *n = realloc(p->files, cap * sizeof(*n));

		if (!n)
			return NULL;
		p->files = n;
		p->cap_files = cap;
	}
	memset(&p->files[p->n_files], 0, sizeof(p->files[0]));
	p->files[p->n_files].path = strdup(path);
	if (!p->files[p->n_files].path)
		return NULL;
	p->files[p->n_files].last_grow = -1;
	p->files[p->n_files].last_logged = -1;
	return &p->files[p->n_files++];
}

/* Bytes per second over the last RATE_WINDOW_MS: from the newest sample at
 * least that old (the oldest kept while the file is younger: from its
 * open, with nothing written then). A frozen count gives 0 once the window
 * has passed, not an average that decays. */
static double file_rate(const struct pfile *f, double now)
{
	double t0 = f->first_ms, b0 = 0;

	for (int i = 0; i < f->n; i++) {
		int j = (f->head - f->n + i + RATE_SAMPLES) % RATE_SAMPLES;

		if (i == 0 && f->n == RATE_SAMPLES) {
			/* the ring is full: its oldest is the earliest known */
			t0 = f->t[j];
			b0 = f->b[j];
		}
		if (now - f->t[j] >= RATE_WINDOW_MS) {
			t0 = f->t[j];
			b0 = f->b[j];
		}
	}
	if (now - t0 < 500)
		return 0;
	return f->bytes > b0 ? (f->bytes - b0) / ((now - t0) / 1000) : 0;
}

/* A file being written where downloads go: an *.incomplete blob, or a
 * file growing under a cache or the model directory (not the cache's
 * bookkeeping: locks, refs, .no_exist). */
static bool watched(const struct tl_view *v, const char *path, const struct hf_cache_dir *dirs,
		    int n)
{
	if (!strncmp(path, "[fd] ", 5))
		return false;
	if (hf_hub_temp(path) || dl_entry(v, path))
		return true;
	/* a copy (copies[]) is said as one, not as a download */
	for (size_t i = 0; i < v->n_copies; i++)
		if (v->copies[i].path && !strcmp(v->copies[i].path, path))
			return false;
	if (hf_cache_meta(path))
		return false;
	for (int i = 0; i < n; i++)
		if (path_under(path, dirs[i].path))
			return true;
	return false;
}

/* Bytes received from network peers as answers (not DNS, not a TLS
 * handshake: stall_conn_answer_bytes; peers without per-connection counts:
 * all they sent): while one download is in flight, what arrives is its
 * data. huggingface_hub writes in 10 MiB chunks, so a file's own size
 * moves in steps and small files not at all until they are complete. */
static double net_in(const struct tl_view *v)
{
	double s = 0;
	size_t i;

	for (i = 0; i < v->n_connects; i++)
		if (v->connects[i].peer && strncmp(v->connects[i].peer, "unix:", 5))
			s += stall_conn_answer_bytes(&v->connects[i]);
	for (i = 0; i < v->n_network; i++) {
		const struct tl_peer *n = &v->network[i];
		bool per_conn = false;

		if (!n->peer || n->dns)
			continue;
		for (size_t j = 0; j < v->n_connects && !per_conn; j++)
			per_conn = v->connects[j].peer && !strcmp(v->connects[j].peer, n->peer) &&
				   tl_has(v->connects[j].bytes_out);
		if (!per_conn)
			s += tl_or0(n->bytes_in);
	}
	return s;
}

static void emit(struct progress *p, bool terminal, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emit(struct progress *p, bool terminal, const char *fmt, ...)
{
	char buf[2048], esc[4096];
	const char *shown;
	size_t n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* names come from the trace: no control character reaches a terminal
	 * (util.h text_esc); the line's own newline stays */
	n = strlen(buf);
	if (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	shown = text_esc(buf, esc, sizeof(esc) - 1);
	if (shown == buf)
		shown = strcpy(esc, buf);
	strcat(esc, "\n");
	if (terminal)
		progress_clear(p);
	if (p->o.emit)
		p->o.emit(p->o.arg, esc, terminal);
}

void progress_clear(struct progress *p)
{
	if (!p || !p->line_shown)
		return;
	fputs("\r\033[K", p->o.tty);
	fflush(p->o.tty);
	p->line_shown = false;
}

static int tty_width(FILE *f)
{
	struct winsize ws;

	if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		return ws.ws_col;
	return 100;
}

/* "downloaded REPO/FILE: SIZE", once per file. */
static void say_downloaded(struct progress *p, struct pfile *pf)
{
	char sz[32];

	pf->done = true;
	/* the file's size, from the kernel (the bytes counted while it was
	 * in flight may include other answers, or miss an earlier run's) */
	fmt_bytes(sz, sizeof(sz), pf->final_size > 0 ? pf->final_size : pf->bytes);
	if (p->o.mode != PROGRESS_OFF)
		emit(p, p->o.mode == PROGRESS_LOG, "tts-launch: downloaded %s: %s\n", pf->name, sz);
}

/* The line's tail from the expected size (dlsize_text): a known size the
 * bytes so far exceed is dropped for the file, and no percent said. */
static void left_text(struct pfile *pf, double rate, char *out, size_t len)
{
	if (pf->from == DLSIZE_KNOWN && (pf->known_dropped || pf->bytes > pf->expected)) {
		pf->known_dropped = true;
		out[0] = 0;
		return;
	}
	dlsize_text(pf->bytes, pf->expected, pf->from, rate, out, len);
}

/* The kernel's size of a renamed download (downloads[].size once
 * complete), 0 when the model has none */
static double final_size(const struct tl_download *d)
{
	if (!d || !d->complete)
		return 0;
	if (tl_or0(d->size) > 0)
		return d->size;
	return d->expected_from && !strcmp(d->expected_from, "kernel") ? tl_or0(d->expected_size)
								       : 0;
}

/* Files: sizes, rates, what is active; lines per the mode. Returns the
 * bytes written to watched files (part of the progress signature). */
static double sample_files(struct progress *p, const json_t *root, const struct tl_view *v,
			   double now)
{
	struct hf_cache_dir dirs[HF_MAX_CACHE_DIRS];
	int nd = diagnose_cache_dirs(root, dirs, HF_MAX_CACHE_DIRS, true);
	char line[1024] = "";
	int active = 0;
	struct pfile *stalled_pf = NULL;
	double total = 0, net = net_in(v);
	const struct tl_file *flying;
	const struct tl_download *dl;
	int n_flying = tl_view_downloads_in_flight(v, &flying);

	for (size_t i = 0; i < v->n_files; i++) {
		const struct tl_file *f = &v->files[i];
		const char *path = f->path;
		double w = tl_or0(f->bytes_written);
		struct pfile *pf;

		if (!path || (w <= 0 && f != flying) || !watched(v, path, dirs, nd))
			continue;
		total += w;
		pf = file_get(p, path);
		if (!pf)
			continue;
		dl = dl_entry(v, path);
		if (!pf->n) {
			pf->first_seen = now;
			pf->net0 = net;
			pf->first_ms = tl_or0(f->first_ms);
			pf->download = hf_hub_temp(path) || dl;
			progress_download_name(v, path, pf->first_ms, pf->name, sizeof(pf->name));
		}
		if (dl) {
			/* the distinct bytes written, the expected size (Xet's
			 * parallel writes: not the sum of the writes) */
			if (tl_or0(dl->bytes) > 0)
				w = dl->bytes;
			pf->expected = tl_or0(dl->expected_size);
			pf->from = dlsize_from_parse(dl->expected_from);
			if (pf->from == DLSIZE_NONE)
				pf->expected = 0;
			/* written at offsets (several threads, or its end beyond
			 * what was written, a resumed one's earlier part aside):
			 * the network bytes are not its progress */
			if (!pf->offsets &&
			    (tl_or0(dl->threads) > 1 || pf->from == DLSIZE_AT_LEAST ||
			     tl_or0(dl->size) > tl_or0(dl->bytes) + tl_or0(dl->resumed_from))) {
				/* the network bytes counted before its first
				 * writes are not its progress: its rate starts
				 * again from its distinct bytes (no false stall) */
				pf->offsets = true;
				pf->n = pf->head = 0;
				pf->bytes = 0;
			}
			if (dl->name && !pf->named) {
				snprintf(pf->name, sizeof(pf->name), "%s", dl->name);
				pf->named = true;
			}
		}
		/* the only download in flight: the data received since it was
		 * first seen is its progress (the file grows in 10 MiB steps) */
		if (n_flying == 1 && f == flying && !pf->offsets && net - pf->net0 > w)
			w = net - pf->net0;
		if (w > pf->bytes)
			pf->last_grow = now;
		pf->bytes = w;
		pf->t[pf->head] = now;
		pf->b[pf->head] = w;
		pf->head = (pf->head + 1) % RATE_SAMPLES;
		if (pf->n < RATE_SAMPLES)
			pf->n++;
	}
	for (size_t k = 0; k < p->n_files; k++) {
		struct pfile *pf = &p->files[k];
		char sz[32], rt[32], left[128], what[64];
		double rate;
		bool stalled;

		if (pf->download && !pf->done && tl_view_renamed(v, pf->path)) {
			double fs = final_size(dl_entry(v, pf->path));

			if (fs > 0)
				pf->final_size = fs;
			/* named again from the snapshot link huggingface_hub makes
			 * right after the rename (exact); a sample between the two
			 * waits one more for it */
			if (!progress_download_name(v, pf->path, pf->first_ms, pf->name,
						    sizeof(pf->name)) &&
			    !pf->waited) {
				pf->waited = true;
				continue;
			}
			say_downloaded(p, pf);
			continue;
		}
		if (pf->done || pf->last_grow < 0)
			continue;
		/* a download that stopped growing is said as stalled (rate 0)
		 * while it is not complete and nothing else is being written */
		stalled = now - pf->last_grow >= RATE_WINDOW_MS;
		/* a download stays shown until then (its rate falling to 0),
		 * another file for ACTIVE_MS */
		if (!pf->download && now - pf->last_grow > ACTIVE_MS)
			continue;
		rate = file_rate(pf, now);
		fmt_bytes(sz, sizeof(sz), pf->bytes);
		fmt_bytes(rt, sizeof(rt), rate);
		left_text(pf, rate, left, sizeof(left));
		if (stalled) {
			if (!stalled_pf || pf->last_grow > stalled_pf->last_grow)
				stalled_pf = pf;
			continue;
		}
		snprintf(what, sizeof(what), "at %s/s", rt);
		active++;
		if (p->o.mode == PROGRESS_OFF)
			continue;
		/* periodic lines: every log_every_s per file (tty mode: the log only) */
		if (pf->last_logged < 0 || pf->stall_said ||
		    now - pf->last_logged >= p->o.log_every_s * 1000 - 50) {
			pf->last_logged = now;
			pf->stall_said = false;
			emit(p, p->o.mode == PROGRESS_LOG, "tts-launch: downloading %s: %s %s%s\n",
			     pf->name, sz, what, left);
		}
		if (active == 1)
			snprintf(line, sizeof(line), "tts-launch: downloading %s: %s %s%s",
				 pf->name, sz, what, left);
	}
	/* the newest stalled download, when nothing is moving: said when it
	 * stalls, then every log_every_s */
	if (stalled_pf && !active && p->o.mode != PROGRESS_OFF) {
		struct pfile *pf = stalled_pf;
		char sz[32], left[128];

		fmt_bytes(sz, sizeof(sz), pf->bytes);
		left_text(pf, 0, left, sizeof(left));
		snprintf(line, sizeof(line),
			 "tts-launch: downloading %s: %s, stalled: nothing received for %.0f s "
			 "(0 B/s over the last %.0f s)%s",
			 pf->name, sz, (now - pf->last_grow) / 1000, RATE_WINDOW_MS / 1000, left);
		if (!pf->stall_said || now - pf->last_logged >= p->o.log_every_s * 1000 - 50) {
			pf->last_logged = now;
			pf->stall_said = true;
			emit(p, p->o.mode == PROGRESS_LOG, "%s\n", line);
		}
		active = 1;
	}
	if (p->o.mode == PROGRESS_TTY) {
		int width = tty_width(p->o.tty);

		if (active > 1 && strlen(line) + 20 < sizeof(line))
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " (+%d more)",
				 active - 1);
		if (active) {
			/* one line, rewritten in place: never wider than the terminal */
			char esc[sizeof(line) * 4];
			const char *shown = text_esc(line, esc, sizeof(esc));

			fprintf(p->o.tty, "\r\033[K%.*s", width - 1, shown);
			fflush(p->o.tty);
			p->line_shown = true;
		} else {
			progress_clear(p);
		}
	}
	return total;
}

/* samples a copy without its paths waits for them (one every 1-3 s) */
#define COPY_HOLD_SAMPLES 3

/* Copies (copies[]: shutil.copy2/copytree through sendfile): one line per
 * file when first seen, "migrating" when it comes from a hub cache. */
static void sample_copies(struct progress *p, const struct tl_view *v, bool final)
{
	for (size_t i = 0; i < v->n_copies; i++) {
		const struct tl_copy *c = &v->copies[i];
		const char *path = c->path, *src = c->source;
		char sz[32];

		if (!path || json_object_get(p->copies, path))
			continue;
		/* a copy that began while the snapshot was read may not have its
		 * paths yet: the destination's open not in it ("[fd] NAME", which
		 * a later snapshot names again, resolved), nor the source's, which
		 * is then "[fd] NAME" or the name its inode had before a rename
		 * (the hub's .incomplete): said from a later snapshot, which has
		 * the destination's open and so the source's, made before it.
		 * One that stays unresolved (opened before tracing, the paths
		 * map full) is said as it is after COPY_HOLD_SAMPLES samples. */
		if (!final && (!src || !strncmp(src, "[fd] ", 5) || !strncmp(path, "[fd] ", 5))) {
			json_int_t n = json_integer_value(json_object_get(p->held, path)) + 1;

			if (n <= COPY_HOLD_SAMPLES) {
				json_object_set_new(p->held, path, json_integer(n));
				continue;
			}
		}
		json_object_del(p->held, path); /* said: no longer waited for */
		json_object_set_new(p->copies, path, json_real(tl_or0(c->bytes)));
		fmt_bytes(sz, sizeof(sz), tl_or0(c->size) > 0 ? c->size : tl_or0(c->bytes));
		if (p->o.mode != PROGRESS_OFF)
			emit(p, p->o.mode == PROGRESS_LOG, "tts-launch: %s %s (%s) from %s\n",
			     c->from_cache ? "migrating" : "copying", c->name ? c->name : path, sz,
			     c->from_cache ? "the old cache"
			     : src	   ? src
					   : "?");
	}
}

/* ---- stalls ---- */

/* Peers as the samples saw them: bytes in/out, when each last grew. */
static void sample_peers(struct progress *p, const struct tl_view *v, double now)
{
	for (size_t i = 0; i < v->n_network; i++) {
		const struct tl_peer *n = &v->network[i];
		const char *peer = n->peer;
		double in = tl_or0(n->bytes_in), out = tl_or0(n->bytes_out),
		       last = tl_or0(n->last_ms);
		json_t *h;

		if (!peer || n->dns || !strncmp(peer, "unix:", 5))
			continue;
		/* a change happened at the peer's last activity (the model's
		 * last_ms), unless that is older than the previous sample */
		h = json_object_get(p->peers, peer);
		if (!h) {
			json_object_set_new(p->peers, peer,
					    json_pack("{s:f, s:f, s:f, s:f}", "in", in, "out", out,
						      "t_in", in > 0 ? last : -1.0, "t_out",
						      out > 0 ? last : -1.0));
			continue;
		}
		if (in > jnum(h, "in"))
			json_object_set_new(h, "t_in", json_real(last > 0 ? last : now));
		if (out > jnum(h, "out"))
			json_object_set_new(h, "t_out", json_real(last > 0 ? last : now));
		json_object_set_new(h, "in", json_real(in));
		json_object_set_new(h, "out", json_real(out));
	}
}

/* Open connections as the samples saw them: bytes in/out and the sample
 * that saw each grow (a reused connection's new request: its out grew
 * after its in). First seen: its write at the connection's start. */
static void sample_conns(struct progress *p, const struct tl_view *v, double now)
{
	for (size_t i = 0; i < v->n_connects; i++) {
		const struct tl_connect *c = &v->connects[i];
		char k[320];
		json_t *h;

		if (!c->peer || !tl_has(c->bytes_out) || tl_has(c->closed_ms))
			continue;
		stall_conn_key(c, k, sizeof(k));
		h = json_object_get(p->conns, k);
		if (!h) {
			double t0 = tl_has(c->established_ms) ? c->established_ms : now;

			json_object_set_new(p->conns, k,
					    json_pack("{s:f, s:f, s:f, s:f}", "in",
						      tl_or0(c->bytes_in), "out", c->bytes_out,
						      "t_in", -1.0, "t_out",
						      c->bytes_out > 0 ? t0 : -1.0));
			continue;
		}
		if (tl_or0(c->bytes_in) > jnum(h, "in"))
			json_object_set_new(h, "t_in", json_real(now));
		if (c->bytes_out > jnum(h, "out"))
			json_object_set_new(h, "t_out", json_real(now));
		json_object_set_new(h, "in", json_real(tl_or0(c->bytes_in)));
		json_object_set_new(h, "out", json_real(c->bytes_out));
	}
}

/* Anything moving that a retry loop does not move: bytes written, file
 * bytes read up to each file's size (a loop re-reads /etc/hosts and the CA
 * bundle for each new connection: not progress; nor are opens, which a
 * lock poll repeats), maps, new files, answers from the network (not a TLS
 * handshake, not DNS: stall_conn_answer_bytes), processes. */
static double signature(const struct tl_view *v)
{
	double s = 0;

	for (size_t i = 0; i < v->n_files; i++) {
		const struct tl_file *e = &v->files[i];
		double rd = tl_or0(e->bytes_read), size = tl_or0(e->size);

		if (e->path && !strncmp(e->path, "[fd] ", 5))
			continue; /* inherited fds: the service's own log output */
		if (size > 0 && rd > size)
			rd = size;
		s += rd + tl_or0(e->bytes_written) + tl_or0(e->mmaps);
	}
	s += v->n_files;
	s += net_in(v);
	s += v->n_procs;
	return s;
}

static void check_stall(struct progress *p, const struct tl_view *v, double now)
{
	double sig = signature(v);
	double faults = tl_or0(v->memory.page_faults);
	json_t *why, *w;
	size_t i;

	if (p->last_progress < 0 || sig != p->sig || faults - p->faults >= FAULTS_PROGRESS) {
		if (p->stalled && p->last_progress >= 0)
			emit(p, true, "tts-launch: progressing again after %.0f s\n",
			     (now - p->last_progress) / 1000);
		p->sig = sig;
		p->faults = faults;
		p->last_progress = now;
		p->stalled = false;
		p->next_stall = 0;
		return;
	}
	p->faults = faults;
	if (p->o.stall_s <= 0 || now - p->last_progress < p->o.stall_s * 1000 ||
	    (p->next_stall > 0 && now < p->next_stall))
		return;
	p->stalled = true;
	p->next_stall = now + p->o.stall_s * 1000;
	{
		/* the download in flight and its name, then stall.c over the views */
		const struct tl_file *fl;
		char name[300];
		struct stall_download dl = {0};

		if (tl_view_downloads_in_flight(v, &fl) && fl->path) {
			dl = (struct stall_download){fl->path, tl_or0(fl->first_ms), name};
			progress_download_name(v, dl.path, dl.first_ms, name, sizeof(name));
		}
		why = stall_waiting_on(v, p->peers, p->conns, dl.path ? &dl : NULL,
				       p->last_progress, now);
	}
	json_array_foreach (why, i, w)
		emit(p, true, "tts-launch: no progress for %.0f s: %s\n",
		     (now - p->last_progress) / 1000, jstr(w, "message"));
	if (json_array_size(p->stalls) < MAX_STALLS)
		json_array_append_new(p->stalls, json_pack("{s:f, s:f, s:o}", "ms", now, "seconds",
							   (now - p->last_progress) / 1000,
							   "waiting_on", why));
	else
		json_decref(why);
}

void progress_sample(struct progress *p, const json_t *root, double now_ms)
{
	struct tl_view *v;

	if (!p || !root)
		return;
	v = tl_view_decode_tree(root);
	p->samples++;
	if (!v)
		return; /* out of memory: the next sample looks again */
	sample_peers(p, v, now_ms);
	sample_conns(p, v, now_ms);
	sample_files(p, root, v, now_ms);
	sample_copies(p, v, false);
	check_stall(p, v, now_ms);
	tl_view_free(v);
}

void progress_timeline(struct progress *p, json_t *root)
{
	struct tl_view *v;

	if (!p || !root)
		return;
	v = tl_view_decode_tree(root);
	/* a completion left waiting for its snapshot link when samples
	 * stopped (ready) is said now, named from the final snapshot */
	for (size_t k = 0; k < p->n_files; k++) {
		struct pfile *pf = &p->files[k];

		if (!pf->waited || pf->done)
			continue;
		if (v) {
			double fs = final_size(dl_entry(v, pf->path));

			if (fs > 0)
				pf->final_size = fs;
			progress_download_name(v, pf->path, pf->first_ms, pf->name,
					       sizeof(pf->name));
		}
		say_downloaded(p, pf);
	}
	/* the copies in the final model, and all a migration moved */
	if (v) {
		double mig = 0;
		int n = 0;

		sample_copies(p, v, true);
		for (size_t i = 0; i < v->n_copies; i++)
			if (v->copies[i].from_cache) {
				mig += tl_or0(v->copies[i].bytes);
				n++;
			}
		if (n && p->o.mode != PROGRESS_OFF) {
			char sz[32];

			fmt_bytes(sz, sizeof(sz), mig);
			emit(p, p->o.mode == PROGRESS_LOG,
			     "tts-launch: migrated %s from the old cache (%d file%s copied, not "
			     "downloaded)\n",
			     sz, n, n == 1 ? "" : "s");
		}
	}
	tl_view_free(v);
	json_object_set_new(root, "progress",
			    json_pack("{s:i, s:f, s:f, s:O}", "samples", p->samples,
				      "snapshot_ms_avg",
				      p->n_snaps ? p->snap_total / p->n_snaps : 0.0,
				      "snapshot_ms_max", p->snap_max, "stalls", p->stalls));
}
