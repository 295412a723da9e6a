/* tphold: tracefs events as perf events, and holders (tphold.h).
 *
 * An attach to a tracepoint nothing is registered on yet (0 -> 1 probe
 * functions) patches the kernel's text twice (its static call, then its
 * static key: each a text_poke with IPIs to every CPU), 1 -> 2 once (the
 * static call to the iterator), N -> N+1 never (the function list only).
 * A raw tracepoint's attach here: ~375-560 us beside nothing, ~240-300
 * beside one registration, ~50 beside two (medians) (scripts/bench/rawtp_attach.py;
 * BENCHMARKS.md, "Raw tracepoints held between runs"). A holder is one
 * registration (the event's perf probe, shared by all its perf events)
 * whose function returns at once: no enabled event of it on any CPU, no
 * program. */
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tphold.h"

static const char *const roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};

long tphold_id(const char *system, const char *event)
{
	char path[200], buf[32];

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		ssize_t len;
		int fd;

		snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[i], system, event);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len > 0) {
			buf[len] = 0;
			return strtol(buf, NULL, 10);
		}
	}
	return -1;
}

int tphold_open(long id, bool hold)
{
	struct perf_event_attr a;
	/* a program's event: the program runs on every CPU whichever CPU the
	 * event is of, and one of this CPU is installed without an IPI to
	 * another (~15 us less an open here) */
	int cpu = hold ? -1 : sched_getcpu();

	if (!hold && cpu < 0)
		cpu = 0;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_TRACEPOINT;
	a.config = (__u64)id;
	a.disabled = hold;
	return (int)syscall(SYS_perf_event_open, &a, hold ? 0 : -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int tphold_events(const char *const *events, int n, int *fds, int max)
{
	char path[200], line[256];
	FILE *f = NULL;
	int got = 0;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]) && !f; i++) {
		snprintf(path, sizeof(path), "%s/available_events", roots[i]);
		f = fopen(path, "re");
	}
	/* one pass over its "system:event" lines for all the names */
	while (f && got < max && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		long id;

		line[strcspn(line, "\n")] = 0;
		if (!colon)
			continue;
		*colon = 0;
		for (int i = 0; i < n && got < max; i++) {
			int fd;

			if (strcmp(colon + 1, events[i]) || (id = tphold_id(line, events[i])) < 0)
				continue;
			fd = tphold_open(id, true);
			if (fd >= 0)
				fds[got++] = fd;
		}
	}
	if (f)
		fclose(f);
	return got;
}

int tphold_programs(const char *const *events, int n, int *fds, int max)
{
	/* r0 = 0; exit */
	static const struct bpf_insn nothing[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	int prog, got = 0;

	if (n <= 0 || max <= 0)
		return 0;
	prog = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "tts_hold", "GPL", nothing,
			     sizeof(nothing) / sizeof(nothing[0]), NULL);
	if (prog < 0)
		return 0;
	for (int i = 0; i < n && got < max; i++) {
		union bpf_attr a;
		int fd;

		/* the system call itself: libbpf moves a descriptor below 3 up
		 * (dup, close), and the keeper has closed 0-2: each link would
		 * come with a close of a link (what test_interp.py counts) */
		memset(&a, 0, sizeof(a));
		a.raw_tracepoint.name = (__u64)(unsigned long)events[i];
		a.raw_tracepoint.prog_fd = (__u32)prog;
		fd = (int)syscall(SYS_bpf, BPF_RAW_TRACEPOINT_OPEN, &a, sizeof(a));
		if (fd >= 0)
			fds[got++] = fd;
	}
	close(prog); /* the links hold it */
	return got;
}
