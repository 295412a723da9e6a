/* tracer_load: the tracer's open -> configure (rodata) -> load of the BPF
 * object (tracer.c's first stage, STYLE.md 3): the build kernel's minimal
 * BTF first when this is that kernel, the full one else; which programs
 * are loaded (USDT, CUDA, which syscall pair); why a load failed. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify.h"
#include "clock.h"
#include "config.h"
#include "hostprobe.h"
#include "pyframes.h"
#include "trace.h"
#include "trace.minbtf.h"
#include "trace.skel.h"
#include "tracer_load.h"

/* The build-time kernel's minimal BTF is exact for that kernel only: same
 * release, version and BTF size (see the Makefile's BTFGen rule). */
static bool min_btf_matches(void)
{
	char id[512];

	return hostprobe_kernel_id(id, sizeof(id)) == 0 && !strcmp(id, trace_min_btf_kernel);
}

/* libbpf 1.1 takes a custom BTF only as a path: hand it a memfd's. */
static int min_btf_fd(void)
{
	/* not memfd_create(): <sys/mman.h> defines MLOCK_ONFAULT, which
	 * config.h's enum mlock_mode also names */
	int fd = (int)syscall(SYS_memfd_create, "trace.min.btf", 1 /* MFD_CLOEXEC */);

	if (fd < 0)
		return -1;
	if (write(fd, trace_min_btf, sizeof(trace_min_btf)) != (ssize_t)sizeof(trace_min_btf)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The last program the verifier rejected, and the last line of its log */
static char rejected_prog[64], rejected_why[160];

void tracer_load_note(const char *msg)
{
	const char *p = strstr(msg, "prog '"), *q, *end, *line;
	size_t n;

	if (!p || !strstr(msg, "BEGIN PROG LOAD LOG") || !(q = strchr(p + 6, '\'')))
		return;
	n = (size_t)(q - p - 6);
	snprintf(rejected_prog, sizeof(rejected_prog), "%.*s", (int)(n < 63 ? n : 63), p + 6);
	rejected_why[0] = '\0';
	/* the verifier's verdict: the last line before its statistics
	 * ("processed N insns ...") and the end marker */
	end = strstr(msg, "-- END PROG LOAD LOG --");
	if (!end)
		end = msg + strlen(msg);
	for (q = end; q > msg;) {
		while (q > msg && (q[-1] == '\n' || q[-1] == ' '))
			q--;
		for (line = q; line > msg && line[-1] != '\n'; line--)
			;
		if (memmem(line, (size_t)(q - line), "BEGIN PROG LOAD LOG", 19))
			break; /* no verdict in the log */
		if (q > line && strncmp(line, "processed ", 10) &&
		    strncmp(line, "verification time", 17) && strncmp(line, "stack depth", 11)) {
			snprintf(rejected_why, sizeof(rejected_why), "%.*s", (int)(q - line), line);
			break;
		}
		q = line;
	}
}

bool tracer_load_rejection(char *why, size_t whylen)
{
	if (!rejected_prog[0])
		return false;
	snprintf(why, whylen,
		 "this kernel's BPF verifier rejected program '%s' (%s): this build does not fit "
		 "this kernel; rebuild it here (make), and if that does not help, report it with "
		 "the output of `tts-launch run -v`",
		 rejected_prog, rejected_why[0] ? rejected_why : "its log: tts-launch run -v");
	return true;
}

static void load_failure(char *why, size_t whylen, int err)
{
	char lb[128];
	const char *ld = hostprobe_lockdown(lb, sizeof(lb));

	if (ld)
		snprintf(why, whylen, "kernel lockdown (%s) forbids BPF tracing", ld);
	else if (err == EACCES &&
		 (hostprobe_has_cap(CAP_BPF) || hostprobe_has_cap(CAP_SYS_ADMIN)) &&
		 tracer_load_rejection(why, whylen))
		; /* with the capabilities held, EACCES is the verifier's answer */
	else if (err == EPERM || err == EACCES)
		snprintf(why, whylen,
			 "not permitted to load BPF programs (run as root, or with CAP_BPF and "
			 "CAP_PERFMON): %s",
			 strerror(err));
	else
		snprintf(why, whylen, "failed to load BPF programs: %s", strerror(err));
}

/* open -> configure (rodata) -> load; first with the build kernel's minimal
 * BTF when this is that kernel, else (or when that fails) with the full
 * one. usdt false: the Python import programs are not loaded. syscalls:
 * which syscall pair is (SYSCALLS_EXACT: raw sys_enter/sys_exit; CHEAP: the
 * per-syscall tracepoints' pair; -1: both, for the doctor). */
struct trace_bpf *tracer_open_load(bool usdt, int syscalls, __u32 ready_port,
				   const struct pyframes_target *py, char *why, size_t whylen)
{
	struct trace_bpf *skel = NULL;
	int err;

	for (int attempt = min_btf_matches() ? 0 : 1; attempt < 2; attempt++) {
		LIBBPF_OPTS(bpf_object_open_opts, oo);
		char btfpath[64];
		int bfd = attempt == 0 ? min_btf_fd() : -1;

		if (bfd >= 0) {
			snprintf(btfpath, sizeof(btfpath), "/proc/self/fd/%d", bfd);
			oo.btf_custom_path = btfpath;
		}
		trace_bpf__destroy(skel);
		skel = trace_bpf__open_opts(&oo);
		if (!skel) {
			err = errno;
			if (bfd >= 0)
				close(bfd);
			snprintf(why, whylen, "failed to open BPF object: %s", strerror(err));
			return NULL;
		}
		if (syscalls == SYSCALLS_CHEAP) {
			bpf_program__set_autoload(skel->progs.sys_enter, false);
			bpf_program__set_autoload(skel->progs.sys_exit, false);
		} else if (syscalls == SYSCALLS_EXACT) {
			bpf_program__set_autoload(skel->progs.syscall_enter, false);
			bpf_program__set_autoload(skel->progs.syscall_exit, false);
			bpf_program__set_autoload(skel->progs.libc_io, false);
		}
		skel->rodata->targ_cheap = syscalls == SYSCALLS_CHEAP;
		if (!usdt) {
			bpf_program__set_autoload(skel->progs.py_import_start, false);
			bpf_program__set_autoload(skel->progs.py_import_done, false);
		}
		/* the CUDA probes need the attach cookie (5.15) and a stopping
		 * signal (5.5): without them the rest still loads */
		if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie,
					    NULL) <= 0 ||
		    libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_send_signal_thread,
					    NULL) <= 0) {
			bpf_program__set_autoload(skel->progs.gpu_enter, false);
			bpf_program__set_autoload(skel->progs.gpu_exit, false);
			bpf_program__set_autoload(skel->progs.gpu_mmap, false);
		} else {
			/* a child forked without exec from a process with CUDA
			 * probes: held for its own (gpu.c attaches them) */
			bpf_program__set_autoload(skel->progs.gpu_fork, true);
			bpf_program__set_autoload(skel->progs.gpu_fork3, true);
		}
		skel->rodata->targ_t0_ns = clock_t0_ns();
		skel->rodata->targ_ready_port = ready_port;
		if (py) /* attribution: the interpreter whose frames are read */
			pyframes_configure(skel, py);
		/* more suffixes than the kernel holds would be model files to the
		 * launcher only: a build-time limit, said at once */
		if (classify_model_keys((uint64_t *)skel->rodata->targ_model_suf,
					(uint64_t *)skel->rodata->targ_model_mask,
					TRACE_MODEL_SUFFIXES) > TRACE_MODEL_SUFFIXES)
			fprintf(stderr, "tts-launch: warning: classify.c has more model suffixes "
					"than TRACE_MODEL_SUFFIXES (bpf/trace.h): raise it\n");
		err = trace_bpf__load(skel);
		if (bfd >= 0)
			close(bfd);
		if (!err)
			return skel;
		if (attempt == 1 || -err == EPERM || -err == EACCES) {
			load_failure(why, whylen, -err);
			break;
		}
	}
	trace_bpf__destroy(skel);
	return NULL;
}
