/* elfsym: an ELF file's dynamic symbols and entries (elfsym.h), with
 * elfutils' libelf: it checks each table against the file's size, so a
 * truncated or malformed file gives no data here, not a wild read. */
#include "elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* .dynsym's GNU hash table (see "by the GNU hash table" below) */
struct gnu_hash {
	uint64_t off, size;			       /* the table in the file */
	uint64_t sym_off, sym_size, str_off, str_size; /* .dynsym, its strings */
	uint32_t nbuckets, symoffset, bloom_size, bloom_shift;
};

struct elfsym {
	int fd;
	Elf *elf;
	GElf_Ehdr eh;
	int hash_state; /* 0: not looked for yet, 1: hash usable, -1: none usable */
	struct gnu_hash hash;
};

struct elfsym *elfsym_open(const char *path, char *why, size_t whylen)
{
	struct elfsym *e;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(why, whylen, "libelf: %s", elf_errmsg(-1));
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(why, whylen, "%s: %s", path, strerror(ENOMEM));
		return NULL;
	}
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		free(e);
		return NULL;
	}
	/* ELF_C_READ, not _MMAP: a file truncated while mapped would be a
	 * SIGBUS, a short pread is an error */
	e->elf = elf_begin(e->fd, ELF_C_READ, NULL);
	if (!e->elf || elf_kind(e->elf) != ELF_K_ELF || !gelf_getehdr(e->elf, &e->eh)) {
		snprintf(why, whylen, "%s: not an ELF file", path);
		elfsym_close(e);
		return NULL;
	}
	return e;
}

void elfsym_close(struct elfsym *e)
{
	if (!e)
		return;
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

int elfsym_fd(const struct elfsym *e) { return e->fd; }

int elfsym_machine(const struct elfsym *e) { return e->eh.e_machine; }

bool elfsym_is_exec(const struct elfsym *e) { return e->eh.e_type == ET_EXEC; }

/* the file offset of value in section shndx, when it lies inside it */
static uint64_t file_offset(Elf *elf, size_t shndx, uint64_t value)
{
	Elf_Scn *in;
	GElf_Shdr sh;

	if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE || !(in = elf_getscn(elf, shndx)) ||
	    !gelf_getshdr(in, &sh) || sh.sh_type == SHT_NOBITS || value < sh.sh_addr ||
	    value - sh.sh_addr >= sh.sh_size)
		return 0;
	return sh.sh_offset + (value - sh.sh_addr);
}

static bool is_func(const GElf_Sym *s)
{
	int type = GELF_ST_TYPE(s->st_info);

	return type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* a definition that counts for the lookup */
static bool wanted(const GElf_Sym *s, bool funcs_only)
{
	return s->st_shndx != SHN_UNDEF && (!funcs_only || is_func(s));
}

static struct elfsym_sym sym_of(Elf *elf, const GElf_Sym *s)
{
	return (struct elfsym_sym){.found = true,
				   .func = is_func(s),
				   .value = s->st_value,
				   .size = s->st_size,
				   .offset = file_offset(elf, s->st_shndx, s->st_value)};
}

static bool pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len;
}

/* ---- by the GNU hash table ----
 *
 * The dynamic loader's own index of .dynsym (SHT_GNU_HASH; the format as
 * the GNU toolchain writes it: nbuckets, symoffset, bloom words, bloom
 * shift; the bloom filter of 64-bit words; a bucket per hash, the first
 * symbol index of its chain; then a word per symbol from symoffset, its
 * hash with the low bit marking the end of a chain). A name is a few small
 * reads: the walk of all of .dynsym read whole (libc: ~90 KB of tables,
 * Python's executable ~400 KB) was ~0.5 ms of a start on these VMs, most
 * of it the first touch of the memory it was read into. */
static uint32_t gnu_hash_of(const char *name)
{
	uint32_t h = 5381;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	return h;
}

/* the ELF64 table for the .dynsym section dynsym, checked against the file
 * (into g) */
static bool gnu_hash_read(struct elfsym *e, Elf_Scn *dynsym, const GElf_Shdr *dsh,
			  struct gnu_hash *g)
{
	size_t dyn = elf_ndxscn(dynsym);
	Elf_Scn *scn = NULL, *strs = elf_getscn(e->elf, dsh->sh_link);
	GElf_Shdr sh, ssh;
	uint32_t hdr[4];
	struct stat st;

	if (e->eh.e_ident[EI_CLASS] != ELFCLASS64 || e->eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    dsh->sh_entsize != sizeof(Elf64_Sym) || !strs || !gelf_getshdr(strs, &ssh) ||
	    ssh.sh_type != SHT_STRTAB || fstat(e->fd, &st))
		return false;
	while ((scn = elf_nextscn(e->elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_HASH && sh.sh_link == dyn)
			break;
	if (!scn || sh.sh_size < sizeof(hdr) || sh.sh_offset > (uint64_t)st.st_size ||
	    sh.sh_size > (uint64_t)st.st_size - sh.sh_offset ||
	    dsh->sh_offset > (uint64_t)st.st_size ||
	    dsh->sh_size > (uint64_t)st.st_size - dsh->sh_offset ||
	    ssh.sh_offset > (uint64_t)st.st_size ||
	    ssh.sh_size > (uint64_t)st.st_size - ssh.sh_offset ||
	    !pread_all(e->fd, hdr, sizeof(hdr), sh.sh_offset))
		return false;
	*g = (struct gnu_hash){.off = sh.sh_offset,
			       .size = sh.sh_size,
			       .sym_off = dsh->sh_offset,
			       .sym_size = dsh->sh_size,
			       .str_off = ssh.sh_offset,
			       .str_size = ssh.sh_size,
			       .nbuckets = hdr[0],
			       .symoffset = hdr[1],
			       .bloom_size = hdr[2],
			       .bloom_shift = hdr[3]};
	/* the buckets and bloom words inside the table, the chains after them */
	return g->nbuckets && g->bloom_size &&
	       16 + 8ull * g->bloom_size + 4ull * g->nbuckets <= g->size;
}

/* the table, looked for once per file (elfsym_find is called name by name) */
static const struct gnu_hash *gnu_hash_find(struct elfsym *e, Elf_Scn *dynsym, const GElf_Shdr *dsh)
{
	if (!e->hash_state)
		e->hash_state = gnu_hash_read(e, dynsym, dsh, &e->hash) ? 1 : -1;
	return e->hash_state > 0 ? &e->hash : NULL;
}

/* name's first wanted definition: 1 found, 0 absent, -1 the table is not
 * to be trusted (the walk of .dynsym decides) */
static int gnu_hash_lookup(struct elfsym *e, const struct gnu_hash *g, const char *name,
			   bool funcs_only, struct elfsym_sym *out)
{
	uint32_t h = gnu_hash_of(name), h2, idx, ch;
	uint64_t word, mask, buckets = g->off + 16 + 8ull * g->bloom_size;
	uint64_t chains = buckets + 4ull * g->nbuckets;
	size_t len = strlen(name);

	if (!pread_all(e->fd, &word, sizeof(word), g->off + 16 + 8ull * ((h / 64) % g->bloom_size)))
		return -1;
	h2 = g->bloom_shift < 32 ? h >> g->bloom_shift : 0;
	mask = (1ull << (h % 64)) | (1ull << (h2 % 64));
	if ((word & mask) != mask)
		return 0;
	if (!pread_all(e->fd, &idx, sizeof(idx), buckets + 4ull * (h % g->nbuckets)))
		return -1;
	if (idx == 0)
		return 0;
	if (idx < g->symoffset)
		return -1;
	for (;; idx++) {
		uint64_t at = chains + 4ull * (idx - g->symoffset);
		GElf_Sym s; /* Elf64_Sym itself */
		char got[256];

		if (at + 4 > g->off + g->size || !pread_all(e->fd, &ch, sizeof(ch), at) ||
		    (uint64_t)idx * sizeof(s) + sizeof(s) > g->sym_size)
			return -1;
		if ((ch | 1) == (h | 1)) {
			if (!pread_all(e->fd, &s, sizeof(s),
				       g->sym_off + (uint64_t)idx * sizeof(s)))
				return -1;
			if (len < sizeof(got) && s.st_name < g->str_size &&
			    len + 1 <= g->str_size - s.st_name &&
			    pread_all(e->fd, got, len + 1, g->str_off + s.st_name) &&
			    !memcmp(got, name, len + 1) && wanted(&s, funcs_only)) {
				*out = sym_of(e->elf, &s);
				return 1;
			}
		}
		if (ch & 1)
			return 0;
	}
}

int elfsym_lookup(struct elfsym *e, const char *const *names, size_t n, bool funcs_only,
		  struct elfsym_sym *out)
{
	Elf_Scn *scn = NULL;
	int found = 0;

	memset(out, 0, n * sizeof(*out));
	while (found < (int)n && (scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const struct gnu_hash *g;
		bool walk = false;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		/* by the hash table; walked when it has none or cannot be trusted */
		if ((g = gnu_hash_find(e, scn, &sh))) {
			for (size_t k = 0; k < n && !walk; k++) {
				int r = out[k].found
					    ? 0
					    : gnu_hash_lookup(e, g, names[k], funcs_only, &out[k]);

				walk = r < 0;
				found += r > 0;
			}
			if (!walk)
				continue;
		}
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && found < (int)n && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s) || !wanted(&s, funcs_only))
				continue;
			name = elf_strptr(e->elf, sh.sh_link, s.st_name);
			for (size_t k = 0; name && k < n; k++) {
				if (out[k].found || strcmp(name, names[k]))
					continue;
				out[k] = sym_of(e->elf, &s);
				found++;
			}
		}
	}
	return found;
}

bool elfsym_find(struct elfsym *e, const char *name, struct elfsym_sym *out)
{
	return elfsym_lookup(e, &name, 1, false, out) == 1;
}

bool elfsym_needed(struct elfsym *e, const char *prefix, char *lib, size_t liblen, char *runpath,
		   size_t rplen)
{
	Elf_Scn *scn = NULL;
	bool found = false, have_runpath = false;

	runpath[0] = 0;
	while ((scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				continue;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RUNPATH &&
			    dyn.d_tag != DT_RPATH)
				continue;
			s = elf_strptr(e->elf, sh.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_NEEDED) {
				if (!found && !strncmp(s, prefix, strlen(prefix))) {
					snprintf(lib, liblen, "%s", s);
					found = true;
				}
			} else if (dyn.d_tag == DT_RUNPATH ? !have_runpath : !runpath[0]) {
				/* RUNPATH wins over RPATH (ld.so ignores RPATH then) */
				snprintf(runpath, rplen, "%s", s);
				have_runpath |= dyn.d_tag == DT_RUNPATH;
			}
		}
	}
	return found;
}

uint64_t elfsym_base_vaddr(struct elfsym *e)
{
	size_t n = 0;

	if (elf_getphdrnum(e->elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e->elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0)
			return ph.p_vaddr;
	}
	return 0;
}

/* vaddr's file offset, in the PT_LOAD whose file bytes hold it; 0: none */
static uint64_t vaddr_offset(Elf *elf, uint64_t vaddr)
{
	size_t n = 0;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr - ph.p_vaddr < ph.p_filesz)
			return ph.p_offset + (vaddr - ph.p_vaddr);
	}
	return 0;
}

/* the sh_addr of the section named name (0: none) */
static uint64_t section_addr(Elf *elf, const char *name)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    !strcmp(n, name))
			return sh.sh_addr;
	}
	return 0;
}

/* One stapsdt note's descriptor: three addresses (the probe, the link-time
 * .stapsdt.base, the semaphore), then provider, name and arguments, each
 * NUL-terminated. True when it is provider:name, with out filled. */
static bool usdt_note(Elf *elf, const char *d, size_t len, const char *provider, const char *name,
		      uint64_t base, struct elfsym_usdt *out)
{
	size_t asz = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8, at = 3 * asz;
	uint64_t a[3] = {0};
	const char *prov, *nm, *args;

	if (len <= at)
		return false;
	for (int i = 0; i < 3; i++) {
		if (asz == 4) {
			uint32_t v;

			memcpy(&v, d + i * asz, 4);
			a[i] = v;
		} else {
			memcpy(&a[i], d + i * asz, 8);
		}
	}
	prov = d + at;
	/* each string ends inside the descriptor */
	if (!(nm = memchr(prov, 0, len - at)) || (size_t)(++nm - d) >= len ||
	    !(args = memchr(nm, 0, len - (size_t)(nm - d))) || (size_t)(++args - d) >= len ||
	    !memchr(args, 0, len - (size_t)(args - d)))
		return false;
	if (strcmp(prov, provider) || strcmp(nm, name))
		return false;
	/* prelinked: the probe moved as .stapsdt.base did */
	if (base && a[1])
		a[0] += base - a[1];
	out->offset = vaddr_offset(elf, a[0]);
	out->sema_offset = a[2] ? vaddr_offset(elf, a[2]) : 0;
	snprintf(out->args, sizeof(out->args), "%s", args);
	return out->offset && (!a[2] || out->sema_offset);
}

bool elfsym_usdt(struct elfsym *e, const char *provider, const char *name, struct elfsym_usdt *out)
{
	uint64_t base = section_addr(e->elf, ".stapsdt.base");
	Elf_Scn *scn = NULL;

	memset(out, 0, sizeof(*out));
	while ((scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		while ((off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			if (nh.n_type != 3 /* NT_STAPSDT */ || nh.n_namesz != sizeof("stapsdt") ||
			    memcmp((const char *)data->d_buf + noff, "stapsdt", sizeof("stapsdt")))
				continue;
			if (usdt_note(e->elf, (const char *)data->d_buf + doff, nh.n_descsz,
				      provider, name, base, out))
				return true;
		}
	}
	memset(out, 0, sizeof(*out));
	return false;
}
