/* reqserver: a TCP server whose behaviour is exactly known, for the request
 * tracing tests. It listens on 127.0.0.1 (an ephemeral port, written to
 * PORTFILE), then accepts exactly N connections one after the other; for
 * each it reads one request (up to a newline or EOF), touches PAGES fresh
 * anonymous pages (so each request takes at least PAGES page faults),
 * writes BYTES bytes of response in writes of at most 1000 bytes, and closes.
 * With MAPFILE, each request also maps that file afresh and reads every
 * page of it (page faults against a mapped file: model faults when its name
 * ends like model weights). Then it exits 0.
 *
 *   reqserver PORTFILE N BYTES [PAGES [MAPFILE]]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "reqserver: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Map path and read each of its pages. */
static void touch_mapped(const char *path, long psz)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	volatile char sum = 0;
	char *m;

	if (fd < 0 || fstat(fd, &st) || st.st_size <= 0)
		die("open MAPFILE");
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		die("mmap MAPFILE");
	for (off_t o = 0; o < st.st_size; o += psz)
		sum += m[o];
	munmap(m, (size_t)st.st_size);
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	long n, bytes, pages = 16, psz = sysconf(_SC_PAGESIZE);
	char buf[1000];
	FILE *pf;
	int ls;

	if (argc < 4) {
		fprintf(stderr, "usage: reqserver PORTFILE N BYTES [PAGES [MAPFILE]]\n");
		return 2;
	}
	n = atol(argv[2]);
	bytes = atol(argv[3]);
	if (argc > 4)
		pages = atol(argv[4]);
	memset(buf, 'r', sizeof(buf));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 16) ||
	    getsockname(ls, (struct sockaddr *)&sa, &sl))
		die("listen");
	pf = fopen(argv[1], "w");
	if (!pf || fprintf(pf, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(pf))
		die("write port file");
	for (long i = 0; i < n; i++) {
		int c = accept(ls, NULL, NULL);
		char *mem;
		long left = bytes;

		if (c < 0)
			die("accept");
		/* one request: up to a newline or EOF */
		for (;;) {
			char in[256];
			ssize_t r = read(c, in, sizeof(in));

			if (r <= 0 || memchr(in, '\n', (size_t)r))
				break;
		}
		mem = mmap(NULL, (size_t)(pages * psz), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			die("mmap");
		/* one fault per page even with multi-size THP (16 kB "always" here) */
		madvise(mem, (size_t)(pages * psz), MADV_NOHUGEPAGE);
		for (long p = 0; p < pages; p++)
			mem[p * psz] = 1;
		munmap(mem, (size_t)(pages * psz));
		if (argc > 5)
			touch_mapped(argv[5], psz);
		while (left > 0) {
			ssize_t w =
			    write(c, buf, left < (long)sizeof(buf) ? (size_t)left : sizeof(buf));

			if (w <= 0)
				die("write");
			left -= w;
		}
		close(c);
	}
	close(ls);
	return 0;
}
