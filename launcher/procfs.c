#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Read a whole small /proc file; returns length or -1. */
static ssize_t read_file(const char *path, char *buf, size_t size)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((size_t)total < size - 1 && (n = read(fd, buf + total, size - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = '\0';
	return total;
}

char *proc_cmdline(pid_t pid)
{
	char path[64], buf[8192];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_file(path, buf, sizeof(buf));
	if (n <= 0)
		return NULL;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return strdup(buf);
}

char **proc_argv(pid_t pid)
{
	char path[64], buf[8192];
	ssize_t n;
	size_t count = 0;
	char **argv;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_file(path, buf, sizeof(buf));
	if (n <= 0)
		return NULL;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			count++;
	argv = calloc(count + 2, sizeof(char *));
	if (!argv)
		return NULL;
	count = 0;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
		argv[count++] = strdup(buf + i);
	return argv;
}

void proc_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **p = argv; *p; p++)
		free(*p);
	free(argv);
}

/* /proc/PID/stat from field 3 (state) on: the command name before it may
 * hold spaces and ')', so the fields resume after the last ')'. NULL if the
 * process is gone. */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, buf, len) <= 0)
		return NULL;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

uint64_t proc_start_ticks(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	unsigned long long start = 0;

	/* starttime is field 22 */
	if (!f || sscanf(f,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
			 "%*d %llu",
			 &start) != 1)
		return 0;
	return start;
}

pid_t proc_ppid(pid_t pid)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	int ppid = 0;

	if (!f || sscanf(f, "%*c %d", &ppid) != 1)
		return 0;
	return ppid;
}

bool proc_faults(pid_t pid, unsigned long long *minflt, unsigned long long *majflt)
{
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	/* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt */
	return f && sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu", minflt, majflt) == 2;
}

int proc_pidfd(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

double proc_age_seconds(uint64_t start_ticks)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)start_ticks / (double)hz;
}

char *proc_cwd(pid_t pid)
{
	char path[64], buf[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/* Socket inodes of TCP sockets in LISTEN state (0A) on port. */
static int listen_inodes(int port, unsigned long *inodes, int max)
{
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	int n = 0;

	for (int t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "re");
		char line[512];

		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f)) { /* header */
			fclose(f);
			continue;
		}
		while (fgets(line, sizeof(line), f) && n < max) {
			char local[128];
			unsigned st, lport;
			unsigned long inode;
			char *colon;

			if (sscanf(line, " %*d: %127s %*s %x %*s %*s %*s %*d %*d %lu", local, &st,
				   &inode) != 3)
				continue;
			colon = strrchr(local, ':');
			if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
				continue;
			if (st == 0x0A && (int)lport == port)
				inodes[n++] = inode;
		}
		fclose(f);
	}
	return n;
}

bool proc_port_listening(int port)
{
	unsigned long inodes[4];

	return port > 0 && listen_inodes(port, inodes, 4) > 0;
}

int proc_port_listeners(int port, pid_t *pids, int max)
{
	unsigned long inodes[64];
	int ni = listen_inodes(port, inodes, 64), np = 0;
	DIR *proc;
	struct dirent *de;

	if (ni <= 0)
		return ni;
	proc = opendir("/proc");
	if (!proc)
		return -1;
	while ((de = readdir(proc)) && np < max) {
		char path[300];
		DIR *fds;
		struct dirent *fe;
		pid_t pid;
		bool holds = false;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		while (!holds && (fe = readdir(fds))) {
			char link[300], target[64];
			ssize_t n;
			unsigned long ino;

			snprintf(link, sizeof(link), "/proc/%d/fd/%s", pid, fe->d_name);
			n = readlink(link, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (sscanf(target, "socket:[%lu]", &ino) != 1)
				continue;
			for (int i = 0; i < ni; i++)
				if (inodes[i] == ino)
					holds = true;
		}
		closedir(fds);
		if (holds)
			pids[np++] = pid;
	}
	closedir(proc);
	return np;
}
