// SPDX-License-Identifier: GPL-2.0
/* block: block I/O: requests the traced tree submitted, their latency
 * histogram (issue to completion).
 *
 * A request is the tree's when a process of the tree submitted its first
 * bio (block_bio_queue: submit_bio, in the submitter's context) or was
 * current at its issue. The issue itself often runs elsewhere: from a
 * kernel worker, or from the completion of an earlier request (interrupt
 * context, whoever was current) when the device queue was full; on a
 * loaded VM only 1.1-1.2 of 4 MiB of O_DIRECT reads were counted when the
 * issuer's context alone decided (test_block_io_and_io_wait). */
#include "common.bpf.h"

SEC("raw_tp/block_bio_queue")
int BPF_PROG(block_bio_queue, struct bio *bio)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 key = (__u64)bio;
	__u8 one = 1;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	bpf_map_update_elem(&blockbios, &key, &one, BPF_ANY);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 key = (__u64)rq, bio = (__u64)BPF_CORE_READ(rq, bio), now;
	bool ours = bpf_map_lookup_elem(&procs, &tgid) != NULL;

	if (bio && bpf_map_lookup_elem(&blockbios, &bio)) {
		bpf_map_delete_elem(&blockbios, &bio);
		ours = true;
	}
	if (!ours && !bpf_map_lookup_elem(&blockstart, &key)) /* a requeued one of ours */
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&blockstart, &key, &now, BPF_ANY);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	__u64 *start = bpf_map_lookup_elem(&blockstart, &key);
	__u64 us, *slot;
	__u32 i = 0;

	if (!start)
		return 0;
	us = (bpf_ktime_get_ns() - *start) / 1000;
	bpf_map_delete_elem(&blockstart, &key);
	/* log2 slot: slot i counts latencies in [2^(i-1), 2^i) us */
	for (i = 0; i < TRACE_HIST_SLOTS - 1 && us; i++)
		us >>= 1;
	slot = bpf_map_lookup_elem(&blockhist, &i);
	if (slot)
		__sync_fetch_and_add(slot, 1);
	count(CNT_BLOCK_REQS, 1);
	count(CNT_BLOCK_BYTES, nr_bytes);
	return 0;
}
