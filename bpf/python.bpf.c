// SPDX-License-Identifier: GPL-2.0
/* python: Python imports, from the USDT probes in CPython's import machinery
 * (import__find__load__start(name), import__find__load__done(name, found)).
 * The launcher attaches these as plain uprobes at the probes' addresses, bound
 * to the traced tree with the probes' semaphores (launcher/tracer_attach.c):
 * each link's cookie says where the arguments are (USDT_LOC_* in trace.h),
 * as read from the probe's note. */
#include "common.bpf.h"

/* The argument at loc (USDT_LOC_*) at this probe hit; 0 when unreadable. */
static __always_inline __s64 usdt_arg(struct pt_regs *ctx, __u32 loc)
{
	__u32 reg = (loc >> USDT_LOC_REG_SHIFT) & 0xff;
	int shift = 64 - (8 << ((loc >> USDT_LOC_SIZE_SHIFT) & 3));
	__u64 v = 0;

	if (!(loc & USDT_LOC_VALID) || reg > sizeof(struct pt_regs) - sizeof(v))
		return 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + reg))
		return 0;
	if ((loc & USDT_LOC_DEREF) &&
	    bpf_probe_read_user(&v, sizeof(v), (void *)(v + (__s16)(loc & USDT_LOC_OFF_MASK))))
		return 0;
	/* the low bytes (x86 is little-endian), sign-extended when signed */
	v <<= shift;
	return (loc & USDT_LOC_SIGNED) ? (__s64)v >> shift : (__s64)(v >> shift);
}

static __always_inline struct tl_import_event *import_event(__u32 type)
{
	struct tl_import_event *e;
	__u32 tgid;

	if (!traced_now(&tgid))
		return NULL;
	e = ev_head(sizeof(*e), type, tgid);
	if (!e)
		return NULL;
	e->found = 0;
	return e;
}

SEC("uprobe")
int py_import_start(struct pt_regs *ctx)
{
	struct tl_import_event *e = import_event(EV_IMPORT_START);
	__u64 name;

	if (!e)
		return 0;
	name = usdt_arg(ctx, (__u32)bpf_get_attach_cookie(ctx));
	if (!name || bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)name) < 0)
		e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}

SEC("uprobe")
int py_import_done(struct pt_regs *ctx)
{
	struct tl_import_event *e = import_event(EV_IMPORT_DONE);

	if (!e)
		return 0;
	e->found = (int)usdt_arg(ctx, (__u32)(bpf_get_attach_cookie(ctx) >> 32));
	e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}
