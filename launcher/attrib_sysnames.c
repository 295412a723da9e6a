/* attrib_sysnames: the names of the syscalls a thread of the tree blocks
 * in (attr_syscall_name, attribution.h). */
#include <stddef.h>
#include <sys/syscall.h>

#include "attribution.h"

static const struct {
	int nr;
	const char *name;
} sysnames[] = {
#define S(n)                                                                                       \
	{                                                                                          \
		SYS_##n, #n                                                                        \
	}
    S(read),
    S(write),
    S(pread64),
    S(pwrite64),
    S(readv),
    S(writev),
    S(preadv),
    S(pwritev),
    S(preadv2),
    S(pwritev2),
    S(recvfrom),
    S(sendto),
    S(recvmsg),
    S(sendmsg),
    S(recvmmsg),
    S(sendmmsg),
    S(connect),
    S(accept),
    S(accept4),
    S(poll),
    S(ppoll),
    S(select),
    S(pselect6),
    S(epoll_wait),
    S(epoll_pwait),
    S(epoll_pwait2),
    S(nanosleep),
    S(clock_nanosleep),
    S(pause),
    S(rt_sigsuspend),
    S(rt_sigtimedwait),
    S(futex),
    S(flock),
    S(fcntl),
    S(wait4),
    S(waitid),
    S(openat),
    S(open),
    S(close),
    S(fsync),
    S(fdatasync),
    S(mmap),
    S(munmap),
    S(mprotect),
    S(execve),
    S(exit_group),
    S(newfstatat),
    S(statx),
    S(getdents64),
    S(ioctl),
    S(ftruncate),
    S(fallocate),
    S(splice),
    S(copy_file_range),
    S(unlink),
    S(rename),
    S(mkdir),
    S(clone),
    S(clone3),
    S(madvise),
    S(mlock),
    S(mlockall),
    S(sync_file_range),
    S(getrandom),
    S(sched_yield),
    S(fadvise64),
    S(vfork),
    S(lseek),
    S(fstat),
    S(brk),
    S(exit),
    S(kill),
    S(socket),
    S(bind),
    S(listen),
    S(shutdown),
    S(sendfile),
    S(readlink),
    S(access),
    S(pipe2),
    S(dup2),
    S(chdir),
    S(sync),
    S(syncfs),
    S(msync),
#undef S
};

const char *attr_syscall_name(int nr)
{
	for (size_t i = 0; i < sizeof(sysnames) / sizeof(sysnames[0]); i++)
		if (sysnames[i].nr == nr)
			return sysnames[i].name;
	return NULL;
}
