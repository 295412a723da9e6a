/* spawn's scans of our children: a live child outside a process group is
 * an orphan of it (inside, a member), an exited one is reaped, the kept
 * pids are neither counted nor reaped; the same from the children files
 * of our threads (a second thread's child included) and from a walk of
 * /proc. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "spawn.h"

/* a child in a process group of its own that waits to be killed */
static pid_t live_child(void)
{
	pid_t p = fork();

	if (p == 0) {
		/* gone with the test, even one that failed half-way; holding
		 * none of its output pipes */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(open("/dev/null", O_WRONLY), 1);
		dup2(1, 2);
		setpgid(0, 0);
		pause();
		_exit(0);
	}
	assert_true(p > 0);
	setpgid(p, p); /* whichever runs first */
	return p;
}

static pid_t exited_child(void)
{
	pid_t p = fork();
	siginfo_t si;

	if (p == 0)
		_exit(3);
	assert_true(p > 0);
	/* a zombie now, not reaped (WNOWAIT) */
	assert_int_equal(waitid(P_PID, (id_t)p, &si, WEXITED | WNOWAIT), 0);
	return p;
}

struct forker {
	pid_t child;
	int ready[2], done[2];
};

/* forks, then lives on until told (a thread's exit would hand its
 * children to the main thread) */
static void *fork_in_thread(void *arg)
{
	struct forker *f = arg;
	char c = 0;

	f->child = live_child();
	if (write(f->ready[1], &c, 1) != 1 || read(f->done[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static bool listed(const pid_t *pids, int n, pid_t p)
{
	for (int i = 0; i < n && i < 16; i++)
		if (pids[i] == p)
			return true;
	return false;
}

static void scans(bool walk)
{
	unsigned long walks = spawn_scan_walks;
	pid_t a, b, z, z2, pids[16];
	struct forker f;
	pthread_t th;
	char c;
	int n;

	spawn_scan_walk_proc = walk;
	a = live_child();
	/* a child of another thread, alive: in its children file, not the
	 * main thread's */
	assert_int_equal(pipe(f.ready), 0);
	assert_int_equal(pipe(f.done), 0);
	assert_int_equal(pthread_create(&th, NULL, fork_in_thread, &f), 0);
	assert_int_equal(read(f.ready[0], &c, 1), 1);
	b = f.child;
	z = exited_child();
	z2 = exited_child();

	/* orphans of the group a: b only (a is in it; zombies are not live) */
	n = spawn_orphans(a, 0, pids, 16);
	assert_int_equal(n, 1);
	assert_int_equal(pids[0], b);
	/* of another group: both, or b alone with a excluded */
	n = spawn_orphans(getpid() + 100000, 0, pids, 16);
	assert_int_equal(n, 2);
	assert_true(listed(pids, n, a) && listed(pids, n, b));
	assert_int_equal(spawn_orphans(getpid() + 100000, a, pids, 16), 1);
	/* z2 kept, z reaped */
	spawn_reap_orphans(z2, 0);
	assert_int_equal(waitpid(z, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	assert_int_equal(waitpid(z2, NULL, 0), z2);

	/* a byte, not EOF: the children hold the pipe's ends too */
	assert_int_equal(write(f.done[1], "x", 1), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	close(f.done[1]);
	close(f.done[0]);
	close(f.ready[0]);
	close(f.ready[1]);
	kill(a, SIGKILL);
	kill(b, SIGKILL);
	assert_int_equal(waitpid(a, NULL, 0), a);
	assert_int_equal(waitpid(b, NULL, 0), b);
	assert_int_equal(spawn_orphans(getpid() + 100000, 0, pids, 16), 0);
	/* the children files, where the kernel has them (this one does), no
	 * walk of /proc; else a walk for each of the 5 scans */
	if (!walk && access("/proc/thread-self/children", F_OK) == 0)
		assert_int_equal(spawn_scan_walks, walks);
	else
		assert_int_equal(spawn_scan_walks, walks + 5);
	spawn_scan_walk_proc = false;
}

static void test_children_files(void **state)
{
	(void)state;
	scans(false);
}

static void test_walk_of_proc(void **state)
{
	(void)state;
	scans(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_children_files),
	    cmocka_unit_test(test_walk_of_proc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
