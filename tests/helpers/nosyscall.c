/* nosyscall: runs a command where one system call fails with ENOSYS, as on
 * a kernel without it, for the tests of what tts-launch does then:
 *
 *   nosyscall NAME COMMAND [ARG...]
 *
 * NAME is one of the calls below, numbered for the architecture this is
 * built for. A seccomp filter (inherited by every child: tts-launch's
 * keeper too) answers that call with ENOSYS and lets every other call
 * through; then COMMAND is exec'd. Needs CAP_SYS_ADMIN (root), or it sets
 * no_new_privs first. Exit 127 when it cannot. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "nosyscall: the architecture's AUDIT_ARCH is not known here"
#endif

static const struct {
	const char *name;
	long nr;
} calls[] = {
    {"membarrier", SYS_membarrier},
    {"mount", SYS_mount},
};

int main(int argc, char **argv)
{
	long nr = -1;

	for (size_t i = 0; argc > 2 && i < sizeof(calls) / sizeof(calls[0]); i++)
		if (!strcmp(argv[1], calls[i].name))
			nr = calls[i].nr;
	if (nr < 0) {
		fprintf(stderr,
			"usage: nosyscall NAME COMMAND [ARG...] (NAME: membarrier, mount)\n");
		return 127;
	}
	struct sock_filter f[] = {
	    /* another architecture's call (a 32-bit one) goes through, and so
	     * does an x32 call (its number has bit 30 set): nothing here makes
	     * one */
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 3),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) &&
	    (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	     prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))) {
		perror("nosyscall: seccomp");
		return 127;
	}
	execvp(argv[2], argv + 2);
	perror(argv[2]);
	return 127;
}
