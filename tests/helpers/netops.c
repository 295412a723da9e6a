/* netops: network, lock and directory operations whose outcome is exactly
 * known, for the tracing tests of connect outcomes, DNS accounting, lock
 * waits and failed operations. Each argument is one operation, in order:
 *
 *   refused            non-blocking connect to a closed 127.0.0.1 port, poll
 *                      for the outcome (ECONNREFUSED), close
 *   silent:K:MS        non-blocking connect to a listener that never accepts
 *                      nor reads; send K bytes, wait MS ms, close (connected,
 *                      0 bytes in)
 *   dropped:MS         a listener with backlog 0 whose queue one connection
 *                      fills; a second non-blocking connect gets no answer
 *                      (its SYN is dropped); give up after MS ms and close
 *   dns:Q              a UDP "name server" on 127.0.0.1:53 (exit 77 if that
 *                      port is taken); a connected client sends 2 queries of Q
 *                      bytes with one sendmmsg and receives the 2 answers
 *                      (Q+100 bytes each) with recvfrom; an unconnected client
 *                      sendto()s 1 query and recvfrom()s its answer; then the
 *                      server closes, the connected client sends 1 more query
 *                      and its recv fails with ECONNREFUSED. Port 53 sees 4
 *                      queries (4Q bytes out), 3 answers (3Q+300 in), 1 failure
 *   mkdir:PATH:N       mkdir(PATH) N times, each expected to fail (not EEXIST)
 *   flock:PATH:MS      a child takes flock(LOCK_EX) on PATH and holds it MS ms;
 *                      meanwhile this process blocks in flock(LOCK_EX)
 *   fill:PATH          write 64 KiB blocks to PATH until one fails with ENOSPC
 *                      (exactly one failed write)
 *
 * Exit 0 when every operation behaved as described, 1 otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

static int fail(const char *op, const char *what)
{
	fprintf(stderr, "netops: %s: %s: %s\n", op, what, strerror(errno));
	return 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};

	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A listening TCP socket on an ephemeral loopback port; *port gets it. */
static int listener(int backlog, int *port)
{
	struct sockaddr_in a = loopback(0);
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, backlog) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		return -1;
	*port = ntohs(a.sin_port);
	return l;
}

static int nb_connect(int port)
{
	struct sockaddr_in a = loopback(port);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (c < 0)
		return -1;
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS) {
		close(c);
		return -1;
	}
	return c;
}

/* poll for writability, then SO_ERROR: 0 connected, else the errno; -1 timeout */
static int outcome(int c, int ms)
{
	struct pollfd p = {.fd = c, .events = POLLOUT};
	int err = 0;
	socklen_t l = sizeof(err);

	if (poll(&p, 1, ms) != 1)
		return -1;
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &l);
	return err;
}

static int do_refused(void)
{
	int port, l = listener(1, &port), c;

	if (l < 0)
		return fail("refused", "listen");
	close(l); /* nothing listens there now */
	c = nb_connect(port);
	if (c < 0 || outcome(c, 5000) != ECONNREFUSED)
		return fail("refused", "expected ECONNREFUSED");
	close(c);
	return 0;
}

static int do_silent(long k, long ms)
{
	int port, l = listener(1, &port), c;

	if (l < 0)
		return fail("silent", "listen");
	c = nb_connect(port);
	if (c < 0 || outcome(c, 5000) != 0)
		return fail("silent", "connect");
	memset(buf, 'q', sizeof(buf));
	if (k > (long)sizeof(buf) || send(c, buf, (size_t)k, 0) != k)
		return fail("silent", "send");
	sleep_ms(ms);
	close(c);
	close(l);
	return 0;
}

static int do_dropped(long ms)
{
	struct sockaddr_in a;
	int port, l = listener(0, &port), first, c;

	if (l < 0)
		return fail("dropped", "listen");
	a = loopback(port);
	/* fills the accept queue (backlog 0 holds one) */
	first = socket(AF_INET, SOCK_STREAM, 0);
	if (first < 0 || connect(first, (struct sockaddr *)&a, sizeof(a)))
		return fail("dropped", "first connect");
	c = nb_connect(port);
	if (c < 0 || outcome(c, (int)ms) != -1)
		return fail("dropped", "expected no answer");
	close(c);
	close(first);
	close(l);
	return 0;
}

static int answer(int srv, long q)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);

	if (recvfrom(srv, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl) != q)
		return -1;
	memset(buf, 'a', (size_t)q + 100);
	return sendto(srv, buf, (size_t)q + 100, 0, (struct sockaddr *)&from, fl) == q + 100 ? 0
											     : -1;
}

static int do_dns(long q)
{
	struct sockaddr_in ns = loopback(53), from;
	socklen_t fl = sizeof(from);
	int srv = socket(AF_INET, SOCK_DGRAM, 0), cc = socket(AF_INET, SOCK_DGRAM, 0);
	int cu = socket(AF_INET, SOCK_DGRAM, 0);
	struct iovec iov[2];
	struct mmsghdr mm[2];
	static char q1[512], q2[512];
	struct pollfd p;

	if (srv < 0 || cc < 0 || cu < 0 || q > 400)
		return fail("dns", "socket");
	if (bind(srv, (struct sockaddr *)&ns, sizeof(ns))) {
		if (errno == EADDRINUSE || errno == EACCES)
			exit(77);
		return fail("dns", "bind 127.0.0.1:53");
	}
	if (connect(cc, (struct sockaddr *)&ns, sizeof(ns)))
		return fail("dns", "connect");
	/* glibc's resolver: A and AAAA in one sendmmsg */
	memset(q1, '1', sizeof(q1));
	memset(q2, '2', sizeof(q2));
	memset(mm, 0, sizeof(mm));
	iov[0] = (struct iovec){q1, (size_t)q};
	iov[1] = (struct iovec){q2, (size_t)q};
	mm[0].msg_hdr.msg_iov = &iov[0];
	mm[0].msg_hdr.msg_iovlen = 1;
	mm[1].msg_hdr.msg_iov = &iov[1];
	mm[1].msg_hdr.msg_iovlen = 1;
	if (sendmmsg(cc, mm, 2, 0) != 2)
		return fail("dns", "sendmmsg");
	if (answer(srv, q) || answer(srv, q))
		return fail("dns", "answer");
	for (int i = 0; i < 2; i++)
		if (recvfrom(cc, buf, sizeof(buf), 0, NULL, NULL) != q + 100)
			return fail("dns", "recvfrom");
	/* unconnected */
	if (sendto(cu, q1, (size_t)q, 0, (struct sockaddr *)&ns, sizeof(ns)) != q || answer(srv, q))
		return fail("dns", "sendto");
	if (recvfrom(cu, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl) != q + 100)
		return fail("dns", "recvfrom unconnected");
	/* nothing listens any more: ICMP port unreachable -> ECONNREFUSED */
	close(srv);
	if (send(cc, q1, (size_t)q, 0) != q)
		return fail("dns", "send");
	p = (struct pollfd){.fd = cc, .events = POLLIN};
	poll(&p, 1, 5000);
	if (recv(cc, buf, sizeof(buf), 0) != -1 || errno != ECONNREFUSED)
		return fail("dns", "expected ECONNREFUSED");
	close(cc);
	close(cu);
	return 0;
}

static int do_mkdir(const char *path, long n)
{
	for (long i = 0; i < n; i++)
		if (!mkdir(path, 0755) || errno == EEXIST)
			return fail("mkdir", "expected a failure");
	return 0;
}

static int do_flock(const char *path, long ms)
{
	int ready[2], fd, st;
	pid_t child;
	char c;

	if (pipe(ready))
		return fail("flock", "pipe");
	child = fork();
	if (child == 0) {
		fd = open(path, O_RDWR | O_CREAT, 0644);
		if (fd < 0 || flock(fd, LOCK_EX))
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		sleep_ms(ms);
		_exit(0);
	}
	if (child < 0 || read(ready[0], &c, 1) != 1)
		return fail("flock", "child");
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || flock(fd, LOCK_EX))
		return fail("flock", "lock");
	close(fd);
	waitpid(child, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : fail("flock", "child failed");
}

static int do_fill(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (fd < 0)
		return fail("fill", "open");
	memset(buf, 'f', sizeof(buf));
	do
		n = write(fd, buf, sizeof(buf));
	while (n > 0);
	if (n != -1 || errno != ENOSPC)
		return fail("fill", "expected ENOSPC");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char *a = argv[i], *p1 = strchr(a, ':'), *p2;
		int rc = 1;

		if (p1)
			*p1++ = 0;
		p2 = p1 ? strrchr(p1, ':') : NULL;
		if (!strcmp(a, "refused"))
			rc = do_refused();
		else if (!strcmp(a, "silent") && p2)
			rc = do_silent(atol(p1), atol(p2 + 1));
		else if (!strcmp(a, "dropped") && p1)
			rc = do_dropped(atol(p1));
		else if (!strcmp(a, "dns") && p1)
			rc = do_dns(atol(p1));
		else if (!strcmp(a, "mkdir") && p2 && (*p2 = 0, 1))
			rc = do_mkdir(p1, atol(p2 + 1));
		else if (!strcmp(a, "flock") && p2 && (*p2 = 0, 1))
			rc = do_flock(p1, atol(p2 + 1));
		else if (!strcmp(a, "fill") && p1)
			rc = do_fill(p1);
		else
			fprintf(stderr, "netops: unknown operation %s\n", a);
		if (rc)
			return rc;
	}
	return 0;
}
