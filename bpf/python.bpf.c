// SPDX-License-Identifier: GPL-2.0
/* python: Python imports, from the USDT probes in CPython's import machinery. */
#include "common.bpf.h"

#include <bpf/usdt.bpf.h>

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

SEC("usdt")
int BPF_USDT(py_import_start, const char *name)
{
	struct tl_import_event *e = import_event(EV_IMPORT_START);

	if (!e)
		return 0;
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), name) < 0)
		e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(py_import_done, const char *name, int found)
{
	struct tl_import_event *e = import_event(EV_IMPORT_DONE);

	if (!e)
		return 0;
	e->found = found;
	e->name[0] = 0;
	ev_submit_lazy(e);
	return 0;
}
