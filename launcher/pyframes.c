/* pyframes: the interpreter whose frames the kernel side reads; see
 * pyframes.h. */
#include "pyframes.h"

#include <bpf/bpf.h>
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "elfsym.h"
#include "trace.h"
#include "trace.skel.h"

/* The layouts, x86_64, each from its version's headers (offsetof() over the
 * installed headers with Py_BUILD_CORE: Include/internal/pycore_runtime.h
 * _PyRuntimeState.interpreters.head; pycore_interp.h PyInterpreterState's
 * tstate_head (3.10) or threads.head; cpython/pystate.h PyThreadState's
 * next, thread_id (3.10: pthread_self()) or native_thread_id, frame (3.10)
 * or cframe; pycore_frame.h _PyCFrame.current_frame and
 * _PyInterpreterFrame's f_code, previous, owner (3.12:
 * FRAME_OWNED_BY_CSTACK = 3); cpython/frameobject.h PyFrameObject.f_code
 * (3.10); cpython/code.h co_firstlineno, co_filename, co_qualname (co_name
 * in 3.10, which has no qualname); cpython/unicodeobject.h sizeof
 * PyASCIIObject (the data of a compact ASCII str follows it) and
 * PyCompactUnicodeObject.utf8). Checked against the real interpreters by
 * tests/e2e/test_attribution.py, not against this table. */
static const struct pyframes_layout layouts[] = {
    [10] = {.rt_interp_head = 32,
	    .is_threads_head = 8,
	    .ts_next = 8,
	    .ts_tid = 176,
	    .tid_pthread = 1,
	    .ts_frame = 24,
	    .no_cframe = 1,
	    .frame_code = 32,
	    .code_firstlineno = 40,
	    .code_filename = 104,
	    .code_name = 112,
	    .str_state = 32,
	    .str_ascii_data = 48,
	    .str_utf8 = 56},
    [11] = {.rt_interp_head = 40,
	    .is_threads_head = 16,
	    .ts_next = 8,
	    .ts_tid = 160,
	    .ts_frame = 56,
	    .cframe_current = 8,
	    .frame_code = 32,
	    .code_firstlineno = 72,
	    .code_filename = 112,
	    .code_name = 128,
	    .str_state = 32,
	    .str_ascii_data = 48,
	    .str_utf8 = 56},
    [12] = {.rt_interp_head = 40,
	    .is_threads_head = 72,
	    .ts_next = 8,
	    .ts_tid = 144,
	    .ts_frame = 56,
	    .cframe_current = 0,
	    .frame_code = 0,
	    .frame_previous = 8,
	    .frame_owner = 70,
	    .owner_cstack = 3,
	    .code_firstlineno = 68,
	    .code_filename = 112,
	    .code_name = 128,
	    .str_state = 32,
	    .str_ascii_data = 40,
	    .str_utf8 = 48},
};
#define MINOR_MIN 10
#define MINOR_MAX 12

/* Where the dynamic linker finds lib for exe: its RUNPATH's directories
 * ($ORIGIN expanded), then the usual ones. */
static bool find_lib(const char *exe, const char *lib, const char *runpath, char *out, size_t len)
{
	static const char *const dirs[] = {"/usr/local/lib", "/usr/lib/x86_64-linux-gnu",
					   "/lib/x86_64-linux-gnu", "/usr/lib", "/lib"};
	char origin[PATH_MAX], rp[PATH_MAX], *save = NULL, *dir;
	const char *slash = strrchr(exe, '/');

	snprintf(origin, sizeof(origin), "%.*s", slash ? (int)(slash - exe) : 1, slash ? exe : ".");
	snprintf(rp, sizeof(rp), "%s", runpath);
	for (dir = strtok_r(rp, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char d[PATH_MAX];

		if (!strncmp(dir, "$ORIGIN", 7))
			snprintf(d, sizeof(d), "%s%s", origin, dir + 7);
		else if (!strncmp(dir, "${ORIGIN}", 9))
			snprintf(d, sizeof(d), "%s%s", origin, dir + 9);
		else
			snprintf(d, sizeof(d), "%s", dir);
		if (snprintf(out, len, "%s/%s", d, lib) < (int)len && access(out, R_OK) == 0)
			return true;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (snprintf(out, len, "%s/%s", dirs[i], lib) < (int)len && access(out, R_OK) == 0)
			return true;
	return false;
}

/* 3.x from a name: "python3.10", "libpython3.12.so.1.0"; 0 when none. */
static int minor_of_name(const char *path)
{
	const char *b = strrchr(path, '/'), *p;

	b = b ? b + 1 : path;
	p = strstr(b, "python3.");
	if (!p || !isdigit((unsigned char)p[8]))
		return 0;
	return atoi(p + 8);
}

static bool check_one(const char *path, struct pyframes_target *out, char *why, size_t whylen)
{
	struct elfsym_sym rt, ver_sym;
	uint32_t ver = 0;
	struct stat st;
	struct elfsym *exe, *lib = NULL, *holder;
	char libname[256], runpath[PATH_MAX], libpath[PATH_MAX] = "";
	bool ok = false;
	int minor = 0;

	exe = elfsym_open(path, why, whylen);
	holder = exe;
	if (!exe)
		return false;
	if (fstat(elfsym_fd(exe), &st)) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		goto done;
	}
	if (!elfsym_find(exe, "_PyRuntime", &rt)) {
		/* pyenv's, uv's: the interpreter is in the libpython it needs */
		if (!elfsym_needed(exe, "libpython3.", libname, sizeof(libname), runpath,
				   sizeof(runpath))) {
			snprintf(why, whylen,
				 "%s has no _PyRuntime among its dynamic symbols and needs no "
				 "libpython3.x.so: not a CPython build whose frames can be "
				 "read; its cpu and sleep are named without Python functions",
				 path);
			goto done;
		}
		if (!find_lib(path, libname, runpath, libpath, sizeof(libpath))) {
			snprintf(why, whylen, "%s needs %s, which is not found (RUNPATH %s)", path,
				 libname, runpath[0] ? runpath : "none");
			goto done;
		}
		if (!(lib = elfsym_open(libpath, why, whylen)))
			goto done;
		holder = lib;
		if (!elfsym_find(lib, "_PyRuntime", &rt)) {
			snprintf(why, whylen,
				 "%s (of %s) has no _PyRuntime among its dynamic symbols: its "
				 "frames cannot be found",
				 libpath, path);
			goto done;
		}
	}
	/* the version: Py_Version (3.11+), else the file names */
	if (elfsym_find(holder, "Py_Version", &ver_sym) && ver_sym.offset &&
	    pread(elfsym_fd(holder), &ver, sizeof(ver), (off_t)ver_sym.offset) == sizeof(ver)) {
		if (ver >> 24 == 3)
			minor = (int)((ver >> 16) & 0xff);
	} else {
		minor = libpath[0] ? minor_of_name(libpath) : 0;
		if (!minor)
			minor = minor_of_name(path);
	}
	if (minor < MINOR_MIN || minor > MINOR_MAX || elfsym_machine(exe) != EM_X86_64) {
		char v[32];

		if (minor)
			snprintf(v, sizeof(v), "3.%d", minor);
		else
			snprintf(v, sizeof(v), "version unknown");
		snprintf(why, whylen,
			 "%s is not CPython 3.10, 3.11 or 3.12 on x86_64 (%s): its frame layout "
			 "is not read",
			 path, v);
		goto done;
	}
	memset(out, 0, sizeof(*out));
	out->minor = minor;
	out->lay = layouts[minor];
	out->rt_value = rt.value;
	out->rt_base = elfsym_base_vaddr(holder);
	/* a fixed-address executable holding it: the same address everywhere */
	out->runtime = holder == exe && elfsym_is_exec(exe) ? rt.value : 0;
	/* the kernel's dev_t (MKDEV: major << 20 | minor), as s_dev */
	out->dev = ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev);
	out->ino = st.st_ino;
	snprintf(out->path, sizeof(out->path), "%s", path);
	if (!realpath(holder == lib ? libpath : path, out->rt_path))
		snprintf(out->rt_path, sizeof(out->rt_path), "%s", holder == lib ? libpath : path);
	ok = true;
done:
	elfsym_close(lib);
	elfsym_close(exe);
	return ok;
}

bool pyframes_find(char paths[][PATH_MAX], int n, struct pyframes_target *out, char *why,
		   size_t whylen)
{
	memset(out, 0, sizeof(*out));
	snprintf(why, whylen, "no python interpreter found");
	for (int i = 0; i < n; i++)
		if (check_one(paths[i], out, why, whylen))
			return true;
	return false;
}

void pyframes_configure(struct trace_bpf *skel, const struct pyframes_target *py)
{
	const struct pyframes_layout *l = &py->lay;

	skel->rodata->targ_py_runtime = py->runtime;
	skel->rodata->targ_py_dev = py->dev;
	skel->rodata->targ_py_ino = py->ino;
	skel->rodata->targ_py_rt_interp_head = l->rt_interp_head;
	skel->rodata->targ_py_is_threads_head = l->is_threads_head;
	skel->rodata->targ_py_ts_next = l->ts_next;
	skel->rodata->targ_py_ts_tid = l->ts_tid;
	skel->rodata->targ_py_tid_pthread = l->tid_pthread;
	skel->rodata->targ_py_ts_frame = l->ts_frame;
	skel->rodata->targ_py_no_cframe = l->no_cframe;
	skel->rodata->targ_py_cframe_current = l->cframe_current;
	skel->rodata->targ_py_frame_code = l->frame_code;
	skel->rodata->targ_py_frame_previous = l->frame_previous;
	skel->rodata->targ_py_frame_owner = l->frame_owner;
	skel->rodata->targ_py_owner_cstack = l->owner_cstack;
	skel->rodata->targ_py_code_firstlineno = l->code_firstlineno;
	skel->rodata->targ_py_code_filename = l->code_filename;
	skel->rodata->targ_py_code_name = l->code_name;
	skel->rodata->targ_py_str_state = l->str_state;
	skel->rodata->targ_py_str_ascii_data = l->str_ascii_data;
	skel->rodata->targ_py_str_utf8 = l->str_utf8;
}

/* field 26 of /proc/PID/stat: startcode */
static bool start_code_of(int pid, uint64_t *out)
{
	char p[64], buf[1024], *s;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	s = strrchr(buf, ')'); /* after the command, which may hold spaces */
	if (!s)
		return false;
	/* fields 3.. follow; startcode is the 24th of them */
	for (int f = 2; f < 26 && s; f++)
		s = strchr(s + 1, ' ');
	return s && sscanf(s + 1, "%" SCNu64, out) == 1;
}

bool pyframes_runtime_of(const struct pyframes_target *py, int pid, uint64_t *runtime,
			 uint64_t *start_code)
{
	char p[64], line[PATH_MAX + 128];
	bool found = false;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/maps", pid);
	f = fopen(p, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		char perms[8], dev[16];
		int path_at = 0;
		char *nl;

		if (sscanf(line, "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &off, dev,
			   &ino, &path_at) < 6 ||
		    off != 0 || !path_at)
			continue;
		nl = strchr(line + path_at, '\n');
		if (nl)
			*nl = 0;
		if (strcmp(line + path_at, py->rt_path))
			continue;
		*runtime = start - (py->rt_base & ~0xfffULL) + py->rt_value;
		found = true;
	}
	fclose(f);
	return found && start_code_of(pid, start_code);
}

/* ---- per process ---- */

#define LIVE_SLOTS    4096 /* pids of the tree (open addressing) */
#define LIVE_RETRY_MS 20

struct live_slot {
	int pid;
	bool done;
	double next_ms;
};

struct pyframes_live {
	struct pyframes_target py;
	int fd;
	struct live_slot slot[LIVE_SLOTS];
};

struct pyframes_live *pyframes_live_new(const struct pyframes_target *py, int pyrt_fd)
{
	struct pyframes_live *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->py = *py;
	l->fd = pyrt_fd;
	return l;
}

/* a process of the tree sent a record: if it runs the interpreter and its
 * _PyRuntime is mapped, tell the kernel side (once; retried every
 * LIVE_RETRY_MS until then: the exec's libpython comes a moment later) */
void pyframes_note(void *live, int pid)
{
	struct pyframes_live *l = live;
	struct live_slot *s = NULL;
	struct stat st;
	char exe[64];
	double now;

	if (!l || pid <= 0)
		return;
	for (unsigned i = 0, h = (unsigned)pid * 2654435761u; i < LIVE_SLOTS; i++) {
		struct live_slot *c = &l->slot[(h + i) % LIVE_SLOTS];

		if (c->pid == pid || !c->pid) {
			s = c;
			break;
		}
	}
	if (!s || s->done)
		return;
	now = clock_ms();
	if (s->pid == pid && now < s->next_ms)
		return;
	s->pid = pid;
	s->next_ms = now + LIVE_RETRY_MS;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	if (stat(exe, &st) == 0 &&
	    (((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev)) == l->py.dev &&
	    st.st_ino == l->py.ino) {
		struct {
			uint64_t runtime, start_code;
		} v;
		__u32 k = (__u32)pid;

		if (pyframes_runtime_of(&l->py, pid, &v.runtime, &v.start_code) &&
		    bpf_map_update_elem(l->fd, &k, &v, BPF_ANY) == 0)
			s->done = true;
	}
}

void pyframes_free(void *live) { free(live); }
