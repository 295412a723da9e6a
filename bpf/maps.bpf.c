// SPDX-License-Identifier: GPL-2.0
/* maps: the one definition of every shared map and global (maps.bpf.h);
 * the domain files declare them extern. */
/* maps.bpf.h (through common.bpf.h) defines its maps here */
#define TL_MAPS_HERE
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 targ_ready_port = 0;
const volatile __u64 targ_model_suf[TRACE_MODEL_SUFFIXES] = {};
const volatile __u64 targ_model_mask[TRACE_MODEL_SUFFIXES] = {};
const volatile __u32 targ_cheap = 0;
volatile __u32 libcio_on = 0;
__u64 t0_ns = 0;
__u64 ready_ns = 0;
__u64 model_mapped = 0;
__u64 dl_activity = 0;
volatile __u32 light = 0;
struct model_ranges zero_ranges = {};
