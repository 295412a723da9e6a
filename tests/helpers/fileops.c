/* fileops: file and socket operations with exactly known counts, for the
 * tracing tests. Each argument is one operation, run in order:
 *
 *   open:PATH:N        open(2) PATH read-only and close it, N times
 *   stat:PATH:M        stat(2) PATH M times (a missing path: M failures)
 *   read:PATH:K        open PATH once and read exactly K bytes with read(2)
 *   dread:PATH:K       the same with O_DIRECT (K a multiple of 4096): block
 *                      I/O issued by this process, waited for in D state
 *   write:PATH:K       create/truncate PATH and write exactly K bytes
 *   mmap:PATH          map PATH whole and touch every page
 *   connect:PORT       one blocking TCP connect to 127.0.0.1:PORT
 *   listen:PORT        bind 127.0.0.1:PORT (0: any) and listen; kept open
 *   echo:K             connect to a fresh local listener, send K bytes to it,
 *                      receive them on the accepted side
 *   mlockall           mlockall(MCL_CURRENT), then munlockall()
 *   spin:MS            busy for MS milliseconds, touching a fresh anonymous
 *                      page every 50 us, no syscall in between (the faults of
 *                      a thread that never leaves the CPU)
 *   threads:N:P        N threads each touch P fresh anonymous pages and exit
 *   threadexec:P       a thread other than the main one touches P fresh pages,
 *                      then execs /bin/true (the process goes on as true)
 *   exitthreads:N:MS   N threads touch pages without end; once each has
 *                      faulted 4096 pages and MS ms more have passed, the
 *                      main thread calls exit(0) while they run
 *   sleep:MS           sleep MS milliseconds
 *
 * No stdio on the traced paths (only for errors), so the counts are the
 * operations and nothing else. Exit status 0 when every operation behaved
 * as described, 1 otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[65536] __attribute__((aligned(4096))); /* O_DIRECT needs it */

static int fail(const char *op, const char *what)
{
	fprintf(stderr, "fileops: %s: failed to %s: %s\n", op, what, strerror(errno));
	return 1;
}

/* Split "PATH:N" at its last colon. */
static long long split_count(char *arg, char **path)
{
	char *c = strrchr(arg, ':');

	if (!c)
		return -1;
	*c = 0;
	*path = arg;
	return atoll(c + 1);
}

static int local_socket(struct sockaddr_in *a, int port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((unsigned short)port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return socket(AF_INET, SOCK_STREAM, 0);
}

static int do_echo(long long k)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int l = local_socket(&a, 0), c = -1, s = -1, rc = 1;
	long long sent = 0, got = 0;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		goto out;
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)))
		goto out;
	s = accept(l, NULL, NULL);
	if (s < 0)
		goto out;
	/* alternate so neither side's buffer fills */
	while (got < k) {
		if (sent < k) {
			size_t n =
			    (size_t)(k - sent) < sizeof(buf) ? (size_t)(k - sent) : sizeof(buf);
			ssize_t w = send(c, buf, n, 0);

			if (w < 0)
				goto out;
			sent += w;
		}
		{
			ssize_t r = recv(s, buf, sizeof(buf), 0);

			if (r <= 0)
				goto out;
			got += r;
		}
	}
	rc = 0;
out:
	if (rc)
		fail("echo", "move bytes over loopback");
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	if (l >= 0)
		close(l);
	return rc;
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no syscall */
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Fresh anonymous memory whose pages fault one 4 KiB page at a time: with
 * multi-size THP (a 16 kB "always" size, as on these VMs) one fault would
 * map several pages; MADV_NOHUGEPAGE keeps the counts exact. */
static char *anon_pages(size_t len)
{
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m != MAP_FAILED)
		madvise(m, len, MADV_NOHUGEPAGE);
	return m;
}

/* Touch pages fresh anonymous pages (one fault each); 0 when mapped. */
static int touch_pages(long pages)
{
	char *m = anon_pages((size_t)pages * 4096);

	if (m == MAP_FAILED)
		return -1;
	for (long i = 0; i < pages; i++)
		m[i * 4096] = 1;
	munmap(m, (size_t)pages * 4096);
	return 0;
}

/* A fresh page every 50 us for ms, busy in between: at most 20 pages per ms. */
static int do_spin(long ms)
{
	long pages = ms * 20 + 1, i = 0;
	char *m = anon_pages((size_t)pages * 4096);
	long long t = now_us(), next = t, end = t + ms * 1000LL;

	if (m == MAP_FAILED)
		return fail("spin", "map memory");
	while (t < end) {
		t = now_us();
		if (t >= next && i < pages) {
			m[i++ * 4096] = 1;
			next = t + 50; /* no catching up after time off the CPU */
		}
	}
	munmap(m, (size_t)pages * 4096);
	return 0;
}

static void *thread_touch(void *pages)
{
	return (void *)(intptr_t)touch_pages((long)(intptr_t)pages);
}

static int do_threads(int n, long pages)
{
	pthread_t t[64];
	int rc = 0;

	if (n < 1 || n > 64)
		return fail("threads", "start 1-64 threads");
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, thread_touch, (void *)(intptr_t)pages))
			return fail("threads", "start a thread");
	for (int i = 0; i < n; i++) {
		void *r;

		pthread_join(t[i], &r);
		rc |= r != NULL;
	}
	return rc ? fail("threads", "map memory") : 0;
}

static void *thread_exec(void *pages)
{
	if (touch_pages((long)(intptr_t)pages))
		return (void *)1;
	execl("/bin/true", "true", (char *)NULL);
	return (void *)1;
}

static int churned; /* threads that have touched their 16 MiB once */

/* Touch the pages of 16 MiB, drop them (MADV_DONTNEED), again, forever. */
static void *thread_churn(void *unused)
{
	size_t len = 16 << 20;
	char *m = anon_pages(len);
	bool once = false;

	(void)unused;
	if (m == MAP_FAILED)
		return (void *)1;
	for (;;) {
		for (size_t o = 0; o < len; o += 4096)
			m[o] = 1;
		madvise(m, len, MADV_DONTNEED);
		if (!once)
			__atomic_add_fetch(&churned, 1, __ATOMIC_SEQ_CST);
		once = true;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		char *op = argv[i], *path = NULL;
		long long n;

		if (!strncmp(op, "open:", 5)) {
			n = split_count(op + 5, &path);
			for (long long j = 0; j < n; j++) {
				int fd = open(path, O_RDONLY | O_CLOEXEC);

				if (fd < 0)
					return fail("open", path);
				close(fd);
			}
		} else if (!strncmp(op, "stat:", 5)) {
			struct stat st;

			n = split_count(op + 5, &path);
			for (long long j = 0; j < n; j++)
				if (stat(path, &st) == 0)
					rc = 1; /* the path was meant to be missing */
		} else if (!strncmp(op, "read:", 5) || !strncmp(op, "dread:", 6)) {
			bool direct = op[0] == 'd';
			long long left;
			int fd;

			n = split_count(op + (direct ? 6 : 5), &path);
			fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
			if (fd < 0)
				return fail("read", path);
			for (left = n; left > 0;) {
				size_t want =
				    (size_t)left < sizeof(buf) ? (size_t)left : sizeof(buf);
				ssize_t r = read(fd, buf, want);

				if (r <= 0)
					return fail("read", path);
				left -= r;
			}
			close(fd);
		} else if (!strncmp(op, "write:", 6)) {
			long long left;
			int fd;

			n = split_count(op + 6, &path);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd < 0)
				return fail("write", path);
			memset(buf, 'x', sizeof(buf));
			for (left = n; left > 0;) {
				size_t want =
				    (size_t)left < sizeof(buf) ? (size_t)left : sizeof(buf);
				ssize_t w = write(fd, buf, want);

				if (w <= 0)
					return fail("write", path);
				left -= w;
			}
			close(fd);
		} else if (!strncmp(op, "mmap:", 5)) {
			struct stat st;
			volatile char sum = 0;
			char *m;
			int fd = open(op + 5, O_RDONLY | O_CLOEXEC);

			if (fd < 0 || fstat(fd, &st))
				return fail("mmap", op + 5);
			m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED)
				return fail("mmap", op + 5);
			for (off_t o = 0; o < st.st_size; o += 4096)
				sum += m[o];
			munmap(m, (size_t)st.st_size);
			close(fd);
		} else if (!strncmp(op, "connect:", 8)) {
			struct sockaddr_in a;
			int s = local_socket(&a, atoi(op + 8));

			if (s < 0)
				return fail("connect", "create a socket");
			if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 &&
			    errno != ECONNREFUSED)
				rc = 1;
			close(s);
		} else if (!strncmp(op, "listen:", 7)) {
			struct sockaddr_in a;
			int s = local_socket(&a, atoi(op + 7)), one = 1;

			setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 8))
				return fail("listen", op + 7);
			/* kept open until exit */
		} else if (!strncmp(op, "echo:", 5)) {
			rc |= do_echo(atoll(op + 5));
		} else if (!strcmp(op, "mlockall")) {
			if (mlockall(MCL_CURRENT))
				rc |= fail("mlockall", "lock memory");
			munlockall();
		} else if (!strncmp(op, "spin:", 5)) {
			rc |= do_spin(atol(op + 5));
		} else if (!strncmp(op, "threads:", 8)) {
			long long p = split_count(op + 8, &path);

			rc |= do_threads(atoi(path), (long)p);
		} else if (!strncmp(op, "threadexec:", 11)) {
			pthread_t t;
			void *r = NULL;

			if (pthread_create(&t, NULL, thread_exec, (void *)(intptr_t)atol(op + 11)))
				return fail("threadexec", "start a thread");
			pthread_join(t, &r); /* returns only if the exec failed */
			return fail("threadexec", "exec /bin/true from a thread");
		} else if (!strncmp(op, "exitthreads:", 12)) {
			long long ms = split_count(op + 12, &path);
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
			int n = atoi(path);
			pthread_t t;

			for (int k = 0; k < n; k++)
				if (pthread_create(&t, NULL, thread_churn, NULL))
					return fail("exitthreads", "start a thread");
			/* every thread past its first 4096 faults, however slow the machine */
			while (__atomic_load_n(&churned, __ATOMIC_SEQ_CST) < n) {
				struct timespec ms1 = {0, 1000000};

				nanosleep(&ms1, NULL);
			}
			nanosleep(&ts, NULL);
			exit(0);
		} else if (!strncmp(op, "sleep:", 6)) {
			long ms = atol(op + 6);
			struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

			nanosleep(&ts, NULL);
		} else {
			fprintf(stderr, "fileops: unknown operation %s\n", op);
			return 2;
		}
	}
	return rc;
}
