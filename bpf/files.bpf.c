// SPDX-License-Identifier: GPL-2.0
/* files: the file system as the tree uses it: path lookups and opens
 * folded per directory and name (paths), failed mkdir/unlink/rmdir (failops),
 * locks, the cwd, renames and symlinks, the model files a process maps
 * (mranges, for the fault probes), the ranges each thread writes into a
 * file (wranges: what a download wrote, offsets included) and the copies
 * made by sendfile/copy_file_range (copies). Called from sys_exit
 * (syscalls.bpf.c); with [trace] syscalls = cheap, bytes from close
 * (sx_close) instead of read/write. */
#include "common.bpf.h"

/* A new entry starts as one of these (read-only data, not the stack:
 * file_add is the leaf of call chains that use most of the 512 bytes) */
static const struct file_val file_zero, file_zero_model = {.model = 1};

__attribute__((noinline)) int file_add(__u64 f, struct file_key *k, __u64 now)
{
	struct file *file = (struct file *)f;
	char name[TRACE_NAME_MAX] = {};
	struct file_val *v;
	long len, err;

	if (!k)
		return 0;
	len = bpf_probe_read_kernel_str(name, sizeof(name),
					BPF_CORE_READ(file, f_path.dentry, d_name.name));
	/* the model flag, which other CPUs act on at once (fd_mmap) and may
	 * set themselves (a hub cache's blob), is in the entry from its
	 * insertion and never written here again; the rest is filled in place
	 * (a reader may see it zero a moment) */
	err = bpf_map_update_elem(&files, k, model_name(name, len) ? &file_zero_model : &file_zero,
				  BPF_NOEXIST);
	if (err) {
		if (err != -EEXIST_)
			count(CNT_FILES_FULL, 1);
		return 0;
	}
	v = bpf_map_lookup_elem(&files, k);
	if (!v)
		return 0;
	v->first_ns = now;
	v->size = BPF_CORE_READ(file, f_inode, i_size);
	__builtin_memcpy(v->name, name, sizeof(name));
	return 0;
}

static __always_inline void fd_mmap(long fd, __u64 len, __u64 addr, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(fd);
	struct file_key k;
	struct file_val *v;
	__u32 mode;

	if (!f)
		return;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) != S_IFREG_)
		return;
	v = file_entry(f, &k, now);
	if (!v)
		return;
	v->last_ns = now;
	__sync_fetch_and_add(&v->mmaps, 1);
	__sync_fetch_and_add(&v->mmap_bytes, len);
	if (v->model) {
		struct model_ranges *r = bpf_map_lookup_elem(&mranges, &tgid);
		__u32 slot;

		if (!r) {
			/* too large for the stack: a zeroed global is the template */
			r = map_add(&mranges, &tgid, &zero_ranges, CNT_MAX);
			if (!r)
				return;
		}
		slot = r->n % MODEL_RANGES;
		/* a fault read between these stores finds the slot empty (len 0),
		 * not a range made of the old and the new halves */
		WRITE_ONCE_U64(r->len[slot], 0);
		barrier();
		r->start[slot] = addr;
		r->key[slot] = k;
		barrier();
		WRITE_ONCE_U64(r->len[slot], len);
		r->n++;
		if (!model_mapped)
			model_mapped = 1;
	}
}

/* The directory a relative path is relative to: the dirfd's, or the cwd. */
static __always_inline void path_base(const char *path, long dirfd, __u64 *dev, __u64 *ino)
{
	struct inode *i;

	*dev = *ino = 0;
	if (path[0] == '/')
		return;
	if ((int)dirfd == AT_FDCWD_) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		i = BPF_CORE_READ(task, fs, pwd.dentry, d_inode);
	} else {
		struct file *f = fd_file((int)dirfd);

		if (!f)
			return;
		i = BPF_CORE_READ(f, f_inode);
	}
	if (!i)
		return;
	*dev = BPF_CORE_READ(i, i_sb, s_dev);
	*ino = BPF_CORE_READ(i, i_ino);
}

/* One path operation (open or a stat-like probe) folded into the paths map. */
static __always_inline void path_op(const char *upath, long dirfd, long ret, bool is_open,
				    __u32 oflags, __u32 tgid, __u64 now)
{
	__u32 zero = 0;
	struct path_key *k = bpf_map_lookup_elem(&scratch, &zero);
	struct path_val *v, init = {};
	long len;

	if (!k)
		return;
	/* the key is hashed over all its bytes: clear what a shorter path leaves */
	__builtin_memset(k, 0, sizeof(*k));
	len = bpf_probe_read_user_str(k->path, sizeof(k->path), upath);
	if (len <= 1)
		return;
	path_base(k->path, dirfd, &k->base_dev, &k->base_ino);
	v = bpf_map_lookup_elem(&paths, k);
	if (!v) {
		init.first_ns = now;
		init.first_pid = tgid;
		v = map_add(&paths, k, &init, CNT_PATHS_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	if (ret < 0) {
		if (!v->fail_first_ns)
			v->fail_first_ns = now;
		v->fail_last_ns = now;
		if (is_open) {
			__sync_fetch_and_add(&v->open_fails, 1);
			v->open_errno = -ret;
		} else {
			__sync_fetch_and_add(&v->probe_fails, 1);
			v->probe_errno = -ret;
		}
		return;
	}
	if (is_open) {
		struct file *f = fd_file(ret);

		__sync_fetch_and_add(&v->opens, 1);
		v->open_flags |= oflags & (03 | 0100 | 01000); /* O_ACCMODE|O_CREAT|O_TRUNC */
		if (f) {
			struct file_key fk;
			__u32 mode;

			file_id(f, &fk, &mode);
			v->dev = fk.dev;
			v->ino = fk.ino;
			if (model_path(k->path, len)) { /* a hub cache's blob, by its name */
				struct file_val *fv = file_entry(f, &fk, now);

				if (fv)
					fv->model = 1;
			} else if (targ_cheap && (mode & S_IFMT_) == S_IFREG_) {
				/* cheap: the file's entry from its open (sx_close counts) */
				file_entry(f, &fk, now);
			}
		}
	}
}

/* A failed mkdir/unlink/rmdir, folded per operation and path. */
static __always_inline void failop(__u32 op, const char *upath, long dirfd, long ret, __u32 tgid,
				   __u64 now)
{
	__u32 zero = 0;
	struct failop_key *k = bpf_map_lookup_elem(&fscratch, &zero);
	struct failop_val *v, init = {};

	if (!k)
		return;
	__builtin_memset(k, 0, sizeof(*k));
	k->op = op;
	if (bpf_probe_read_user_str(k->p.path, sizeof(k->p.path), upath) <= 1)
		return;
	path_base(k->p.path, dirfd, &k->p.base_dev, &k->p.base_ino);
	v = bpf_map_lookup_elem(&failops, k);
	if (!v) {
		init.first_ns = now;
		init.pid = tgid;
		v = map_add(&failops, k, &init, CNT_FAILOPS_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	v->err = -ret;
	__sync_fetch_and_add(&v->count, 1);
}

/* flock / fcntl record lock: a0 fd, a1 op or cmd, a2 blocking */
static __always_inline void on_lock(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct file *f = fd_file(in->a0);
	struct lock_val *v, init = {};
	struct file_key k;
	__u32 mode;

	if (!f)
		return;
	file_id(f, &k, &mode);
	v = bpf_map_lookup_elem(&locks, &k);
	if (!v) {
		init.first_ns = in->ts;
		init.pid = tgid;
		bpf_probe_read_kernel_str(init.name, sizeof(init.name),
					  BPF_CORE_READ(f, f_path.dentry, d_name.name));
		v = map_add(&locks, &k, &init, CNT_LOCKS_FULL);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->calls, 1);
	v->last_ns = now;
	if (in->a2) {
		__u64 d = now - in->ts;

		__sync_fetch_and_add(&v->blocking, 1);
		__sync_fetch_and_add(&v->wait_ns, d);
		if (d > v->max_wait_ns)
			v->max_wait_ns = d;
	}
	if (ret < 0) {
		__sync_fetch_and_add(&v->failures, 1);
		v->err = -ret;
		if (!v->first_fail_ns)
			v->first_fail_ns = in->ts;
		/* a refused poll (filelock: LOCK_NB, sleep, again) is a start
		 * waiting on a download's lock: live snapshots go on, and see
		 * the holder (/proc/locks) while it holds */
		__sync_fetch_and_add(&dl_activity, 1);
	} else {
		v->acquired_ns = now;
	}
}

/* chdir/fchdir: the new cwd's inode, so relative paths can be resolved */
static __always_inline void on_chdir(struct inflight *in, long ret, __u32 tgid)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct inode *i = BPF_CORE_READ(task, fs, pwd.dentry, d_inode);
	struct tl_event *e;

	if (ret < 0 || !i)
		return;
	e = ev_reserve(EV_CHDIR, tgid);
	if (!e)
		return;
	e->arg = BPF_CORE_READ(i, i_sb, s_dev);
	e->arg2 = BPF_CORE_READ(i, i_ino);
	if (in->nr != __NR_fchdir)
		bpf_probe_read_user_str(e->str, sizeof(e->str), (void *)in->a0);
	/* the launcher reads the new cwd from /proc while it lasts */
	ev_submit_urgent(e);
}

/* rename/symlink: both paths, with the directories relative ones start from */
static __always_inline void on_path2(struct inflight *in, long ret, __u32 tgid, __u64 now)
{
	struct tl_path2_event *e = ring_reserve(sizeof(*e));
	bool link = in->nr == __NR_symlinkat;

#ifdef __NR_symlink
	link |= in->nr == __NR_symlink;
#endif
	if (!e)
		return;
	e->ts_ns = in->ts;
	e->dur_ns = now - in->ts;
	e->type = link ? EV_SYMLINK : EV_RENAME;
	e->pid = tgid;
	e->ret = ret;
	e->pad = 0;
	e->old[0] = e->new[0] = 0;
	bpf_probe_read_user_str(e->old, sizeof(e->old), (void *)in->a0);
	bpf_probe_read_user_str(e->new, sizeof(e->new), (void *)in->a1);
	if (link)
		e->old_dev = e->old_ino = 0;
	else
		path_base(e->old, in->a2, &e->old_dev, &e->old_ino);
	path_base(e->new, in->a3, &e->new_dev, &e->new_ino);
	ev_submit_lazy(e);
}

SYS_HANDLER(sx_path)
{
	bool is_open;
	__u64 fl = 0;

	if (!c)
		return 0;
	/* the others are failed probes: a missing path tried again and again */
	is_open = c->in.nr == __NR_openat || c->in.nr == __NR_openat2;
#ifdef __NR_open
	is_open |= c->in.nr == __NR_open;
#endif
	if (c->in.nr == __NR_openat2)
		bpf_probe_read_user(&fl, sizeof(fl), (void *)c->in.a1); /* open_how.flags */
	else if (is_open)
		fl = c->in.a1;
	path_op((const char *)c->in.a0, c->in.a2, c->ret, is_open, fl, c->tgid, c->now);
	return 0;
}

SYS_HANDLER(sx_dirop)
{
	bool dir;

	if (!c)
		return 0;
	switch (c->in.nr) {
#ifdef __NR_mkdir
	case __NR_mkdir:
#endif
	case __NR_mkdirat:
		if (c->ret != -EEXIST_)
			failop(FOP_MKDIR, (const char *)c->in.a0, c->in.a2, c->ret, c->tgid,
			       c->now);
		return 0;
	}
	if (c->ret == -ENOENT_)
		return 0;
	dir = c->in.nr == __NR_unlinkat ? (c->in.a1 & AT_REMOVEDIR_) != 0 : false;
#ifdef __NR_rmdir
	dir |= c->in.nr == __NR_rmdir;
#endif
	failop(dir ? FOP_RMDIR : FOP_UNLINK, (const char *)c->in.a0, c->in.a2, c->ret, c->tgid,
	       c->now);
	return 0;
}

SYS_HANDLER(sx_mmap)
{
	if (c && (c->ret >= 0 || c->ret < -4095))
		fd_mmap(c->in.a0, c->in.a1, (__u64)c->ret, c->tgid, c->now);
	return 0;
}

/* the rest: the cwd, locks, rename/symlink */
SYS_HANDLER(sx_other)
{
	if (!c)
		return 0;
	switch (c->in.nr) {
	case __NR_chdir:
	case __NR_fchdir:
		on_chdir(&c->in, c->ret, c->tgid);
		break;
	case __NR_flock:
	case __NR_fcntl:
		on_lock(&c->in, c->ret, c->tgid, c->now);
		break;
	default:
		/* rename, symlink */
		on_path2(&c->in, c->ret, c->tgid, c->now);
	}
	return 0;
}

/* [off, off + n) written into file f (dev/ino k) by this thread: into its
 * ranges of the file (user space merges across slots) */
static __always_inline void wr_add(struct file *f, const struct file_key *fk, __u64 off, __u64 n,
				   __u64 first_ns, __u32 tgid, __u64 now)
{
	struct wr_key k = {};
	struct wr_val *v, init = {};
	__u64 end = off + n;

	k.dev = fk->dev;
	k.ino = fk->ino;
	k.tid = (__u32)bpf_get_current_pid_tgid();
	v = bpf_map_lookup_elem(&wranges, &k);
	if (!v) {
		init.first_ns = first_ns;
		init.pid = tgid;
		v = map_add(&wranges, &k, &init, CNT_WRANGES_FULL);
		if (!v)
			return;
	}
	v->last_ns = now;
	v->isize = BPF_CORE_READ(f, f_inode, i_size);
	if (end > v->max_end)
		v->max_end = end;
	for (int i = 0; i < WR_SLOTS; i++) {
		if (i >= v->n)
			break;
		/* overlapping or touching: one range */
		if (off <= v->hi[i] && end >= v->lo[i]) {
			if (off < v->lo[i])
				v->lo[i] = off;
			if (end > v->hi[i])
				v->hi[i] = end;
			return;
		}
	}
	if (v->n < WR_SLOTS) {
		__u32 s = v->n & (WR_SLOTS - 1);

		v->lo[s] = off;
		v->hi[s] = end;
		v->n++;
	} else {
		v->extra += n;
	}
}

/* write/pwrite/writev/pwritev that wrote ret bytes (a0 fd, a3 the offset
 * of the p* calls; the others wrote at the file position, which the call
 * has moved past them): the range into this thread's ranges of the file */
SYS_HANDLER(sx_fwrite)
{
	struct file *f;
	struct file_key fk;
	__u64 off, n;
	__u32 mode;
	long nr;

	if (!c || c->ret <= 0)
		return 0;
	f = fd_file(c->in.a0);
	if (!f)
		return 0;
	file_id(f, &fk, &mode);
	if ((mode & S_IFMT_) != S_IFREG_)
		return 0;
	n = c->ret;
	nr = c->in.nr;
	if ((nr == __NR_pwrite64 || nr == __NR_pwritev || nr == __NR_pwritev2) &&
	    (__s64)c->in.a3 >= 0)
		off = c->in.a3;
	else
		off = BPF_CORE_READ(f, f_pos) - n;
	wr_add(f, &fk, off, n, c->now, c->tgid, c->now);
	return 0;
}

/* [trace] syscalls = cheap, a close of fd a0 (at its entry): what reads
 * and writes of this open would have counted, approximately. A file open
 * for writing wrote up to its position (a sequential writer), or, at the
 * position 0 (pwrite at offsets), what it grew by since first seen; one
 * open for reading only read up to its position. Seeks, dup'd descriptors,
 * files never closed and reads of a file open read-write are not right
 * (docs/timeline.md, "tracing.syscalls"). */
SYS_HANDLER(sx_close)
{
	struct file *f;
	struct file_key k;
	struct file_val *v;
	__u64 pos, isize, n;
	__u32 mode, fmode;

	if (!c)
		return 0;
	f = fd_file(c->in.a0);
	if (!f)
		return 0;
	file_id(f, &k, &mode);
	if ((mode & S_IFMT_) != S_IFREG_)
		return 0;
	fmode = BPF_CORE_READ(f, f_mode);
	pos = BPF_CORE_READ(f, f_pos);
	isize = BPF_CORE_READ(f, f_inode, i_size);
	v = file_entry(f, &k, c->now);
	if (!v)
		return 0;
	/* libc's calls are seen one by one (libcio.bpf.c): nothing to guess,
	 * unless none was counted on this file (glibc's own reads, as of
	 * /etc/localtime or /etc/hosts, bypass its exported read) */
	if (libcio_on && libcio_seen() && (v->reads || v->writes || v->write_errors))
		return 0;
	/* an estimate while libc's calls are probed, in a process they have
	 * not reached (yet): files the tree maps are ld.so's libraries, read
	 * before libc runs, not noted */
	if (libcio_on && !v->mmaps && (pos || isize > v->size))
		libcio_estimate();
	if (fmode & FMODE_WRITE_) {
		n = pos ? pos : isize > v->size ? isize - v->size : 0;
		if (!n)
			return 0;
		__sync_fetch_and_add(&dl_activity, n);
		__sync_fetch_and_add(&v->bytes_written, n);
		__sync_fetch_and_add(&v->writes, 1);
		if (!v->first_write_ns)
			v->first_write_ns = v->first_ns;
		v->last_write_ns = c->now;
		v->last_ns = c->now;
		wr_add(f, &k, pos ? pos - n : v->size, n, v->first_ns, c->tgid, c->now);
	} else if ((fmode & FMODE_READ_) && pos) {
		__sync_fetch_and_add(&v->bytes_read, pos);
		__sync_fetch_and_add(&v->reads, 1);
		v->last_ns = c->now;
	}
	return 0;
}

/* sx_copy's entries, each made in a frame of its own: inlined into
 * sx_copy, the two files entries' and the copy's initial values took 424
 * bytes of its stack, and 6.18.44's verifier counts the exit program's frame
 * with it (combined 528 > 512: the whole object was rejected). A per-CPU
 * scratch instead would not do: libc_io reaches file_entry from a uprobe,
 * which a preemptible kernel may preempt. */
static __attribute__((noinline)) struct file_val *copy_file(struct file *f, struct file_key *k,
							    __u64 now)
{
	return file_entry(f, k, now);
}

static __attribute__((noinline)) struct copy_val *copy_entry(struct sys_call *c, struct file *dst,
							     struct file *src, struct file_key *dk,
							     struct file_key *sk)
{
	struct copy_val *v = bpf_map_lookup_elem(&copies, dk), init = {};

	if (v)
		return v;
	init.src = *sk;
	init.first_ns = c->now;
	init.pid = c->tgid;
	bpf_probe_read_kernel_str(init.src_name, sizeof(init.src_name),
				  BPF_CORE_READ(src, f_path.dentry, d_name.name));
	bpf_probe_read_kernel_str(init.dst_name, sizeof(init.dst_name),
				  BPF_CORE_READ(dst, f_path.dentry, d_name.name));
	return map_add(&copies, dk, &init, CNT_COPIES_FULL);
}

/* sendfile / copy_file_range that moved ret bytes from file a1 into file
 * a0: a copy (shutil.copy2 on Linux), by destination */
SYS_HANDLER(sx_copy)
{
	struct file *dst, *src;
	struct file_key dk, sk;
	struct copy_val *v;
	struct file_val *fv;
	__u32 dmode, smode;

	if (!c || c->ret <= 0)
		return 0;
	dst = fd_file(c->in.a0);
	src = fd_file(c->in.a1);
	if (!dst || !src)
		return 0;
	file_id(dst, &dk, &dmode);
	file_id(src, &sk, &smode);
	if ((dmode & S_IFMT_) != S_IFREG_ || (smode & S_IFMT_) != S_IFREG_)
		return 0;
	v = copy_entry(c, dst, src, &dk, &sk);
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->bytes, c->ret);
	__sync_fetch_and_add(&v->calls, 1);
	v->last_ns = c->now;
	v->isize = BPF_CORE_READ(dst, f_inode, i_size);
	/* the files map sees the bytes too: read from one, written to the
	 * other (cheap: at their close, from the positions) */
	if (targ_cheap && !libcio_seen())
		return 0;
	fv = copy_file(src, &sk, c->now);
	if (fv) {
		__sync_fetch_and_add(&fv->bytes_read, c->ret);
		__sync_fetch_and_add(&fv->reads, 1);
		fv->last_ns = c->now;
	}
	fv = copy_file(dst, &dk, c->now);
	if (fv) {
		__sync_fetch_and_add(&fv->bytes_written, c->ret);
		__sync_fetch_and_add(&fv->writes, 1);
		if (!fv->first_write_ns)
			fv->first_write_ns = c->now;
		fv->last_write_ns = c->now;
		fv->last_ns = c->now;
	}
	return 0;
}
