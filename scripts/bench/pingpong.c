/* pingpong: two processes pass one byte back and forth over two pipes N
 * times (default 200000): each round trip is two writes, two reads and two
 * context switches. The context-switch-heavy neighbour of neighbours.py.
 *
 *     cc -O2 -o pingpong pingpong.c && ./pingpong [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int ab[2], ba[2], st;
	char c = 'x';
	pid_t p;

	if (pipe(ab) || pipe(ba)) {
		perror("pingpong: pipe");
		return 1;
	}
	p = fork();
	if (p < 0) {
		perror("pingpong: fork");
		return 1;
	}
	if (p == 0) {
		for (long i = 0; i < n; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	for (long i = 0; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) {
			fprintf(stderr, "pingpong: the other side went away\n");
			return 1;
		}
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	return 0;
}
