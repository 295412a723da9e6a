/* elfsym: a small ELF shared object written here byte by byte (so every
 * value is known), the C library this test runs with (a symbol's value
 * against where the loader put it), and broken files: truncated at every
 * length, tables pointing outside the file, garbage. A broken file is an
 * error or finds nothing; it never crashes and never gives a wrong value. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "elfsym.h"

static char top[] = "/tmp/tts-elfsym-XXXXXX";

/* ---- the object: a layout fixed here ---- */

#define BASE	    0x10000ULL /* the PT_LOAD at file offset 0 */
#define TEXT_OFF    0x100
#define DYNSTR_OFF  0x120
#define DYNSYM_OFF  0x180
#define DYNAMIC_OFF 0x1e0
#define SHSTR_OFF   0x230
#define SHDR_OFF    0x280
#define N_SECTIONS  6
#define FILE_SIZE   (SHDR_OFF + N_SECTIONS * sizeof(Elf64_Shdr))

enum { S_NULL, S_TEXT, S_DYNSTR, S_DYNSYM, S_DYNAMIC, S_SHSTR };

static const char dynstr[] = "\0alpha\0beta\0undef\0libfoo.so\0libpython3.12.so.1.0\0/rpath\0"
			     "$ORIGIN/../lib";
#define STR_ALPHA   1
#define STR_BETA    7
#define STR_UNDEF   12
#define STR_LIBFOO  18
#define STR_LIBPY   28
#define STR_RPATH   49
#define STR_RUNPATH 56

static const char shstr[] = "\0.text\0.dynstr\0.dynsym\0.dynamic\0.shstrtab";

static unsigned char obj[FILE_SIZE];

static Elf64_Shdr *shdr(unsigned char *b, int i)
{
	return (Elf64_Shdr *)(b + SHDR_OFF + i * sizeof(Elf64_Shdr));
}

static Elf64_Sym *sym(unsigned char *b, int i)
{
	return (Elf64_Sym *)(b + DYNSYM_OFF + i * sizeof(Elf64_Sym));
}

/* b's ELF header (x86-64, type) and its one PT_LOAD, all of size bytes at
 * vaddr; the section headers at shoff (shnum of them, names in shstrndx) */
static void header(unsigned char *b, int type, uint64_t vaddr, size_t size, uint64_t shoff,
		   int shnum, int shstrndx)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Phdr *ph = (Elf64_Phdr *)(b + sizeof(*eh));

	memset(b, 0, size);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = (Elf64_Half)type;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_shoff = shoff;
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = (Elf64_Half)shnum;
	eh->e_shstrndx = (Elf64_Half)shstrndx;
	*ph = (Elf64_Phdr){.p_type = PT_LOAD,
			   .p_flags = PF_R | PF_X,
			   .p_offset = 0,
			   .p_vaddr = vaddr,
			   .p_paddr = vaddr,
			   .p_filesz = size,
			   .p_memsz = size,
			   .p_align = 0x1000};
}

static void build(unsigned char *b)
{
	Elf64_Dyn *dyn = (Elf64_Dyn *)(b + DYNAMIC_OFF);
	static const struct {
		int name;
		unsigned char info;
		int shndx;
		uint64_t value, size;
	} syms[] = {
	    {0, 0, SHN_UNDEF, 0, 0},
	    {STR_ALPHA, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), S_TEXT, BASE + TEXT_OFF + 4, 4},
	    {STR_BETA, ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), S_TEXT, BASE + TEXT_OFF + 16, 8},
	    {STR_UNDEF, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), SHN_UNDEF, 0, 0},
	};
	static const struct {
		int type, name, off, size, link, entsize;
	} secs[] = {
	    [S_TEXT] = {SHT_PROGBITS, 1, TEXT_OFF, 32, 0, 0},
	    [S_DYNSTR] = {SHT_STRTAB, 7, DYNSTR_OFF, sizeof(dynstr), 0, 0},
	    [S_DYNSYM] = {SHT_DYNSYM, 15, DYNSYM_OFF, 4 * sizeof(Elf64_Sym), S_DYNSTR,
			  sizeof(Elf64_Sym)},
	    [S_DYNAMIC] = {SHT_DYNAMIC, 23, DYNAMIC_OFF, 5 * sizeof(Elf64_Dyn), S_DYNSTR,
			   sizeof(Elf64_Dyn)},
	    [S_SHSTR] = {SHT_STRTAB, 32, SHSTR_OFF, sizeof(shstr), 0, 0},
	};
	static const int64_t dyns[][2] = {{DT_NEEDED, STR_LIBFOO},
					  {DT_NEEDED, STR_LIBPY},
					  {DT_RPATH, STR_RPATH},
					  {DT_RUNPATH, STR_RUNPATH},
					  {DT_NULL, 0}};

	header(b, ET_DYN, BASE, FILE_SIZE, SHDR_OFF, N_SECTIONS, S_SHSTR);
	for (int i = 0; i < 32; i++)
		b[TEXT_OFF + i] = (unsigned char)(0xa0 + i);
	memcpy(b + DYNSTR_OFF, dynstr, sizeof(dynstr));
	memcpy(b + SHSTR_OFF, shstr, sizeof(shstr));
	for (int i = 0; i < 4; i++)
		*sym(b, i) = (Elf64_Sym){.st_name = (Elf64_Word)syms[i].name,
					 .st_info = syms[i].info,
					 .st_shndx = (Elf64_Section)syms[i].shndx,
					 .st_value = syms[i].value,
					 .st_size = syms[i].size};
	for (int i = 0; i < 5; i++) {
		dyn[i].d_tag = dyns[i][0];
		dyn[i].d_un.d_val = (Elf64_Xword)dyns[i][1];
	}
	for (int i = S_TEXT; i < N_SECTIONS; i++)
		*shdr(b, i) =
		    (Elf64_Shdr){.sh_name = (Elf64_Word)secs[i].name,
				 .sh_type = (Elf64_Word)secs[i].type,
				 .sh_flags = i == S_TEXT ? SHF_ALLOC | SHF_EXECINSTR : 0,
				 .sh_addr = i == S_SHSTR ? 0 : BASE + (uint64_t)secs[i].off,
				 .sh_offset = (Elf64_Off)secs[i].off,
				 .sh_size = (Elf64_Xword)secs[i].size,
				 .sh_link = (Elf64_Word)secs[i].link,
				 .sh_addralign = 8,
				 .sh_entsize = (Elf64_Xword)secs[i].entsize};
}

/* b[0..len) written to top/name; its path */
static const char *put(const char *name, const void *b, size_t len)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return path;
}

static int setup(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(top));
	build(obj);
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd);
}

/* ---- a good file ---- */

static void test_symbols_values_and_file_offsets(void **state)
{
	const char *names[] = {"beta", "missing", "alpha", "undef"};
	struct elfsym_sym s[4];
	unsigned char bytes[4];
	char why[256];
	struct elfsym *e;

	(void)state;
	e = elfsym_open(put("good.so", obj, sizeof(obj)), why, sizeof(why));
	assert_non_null(e);
	assert_int_equal(elfsym_machine(e), EM_X86_64);
	assert_false(elfsym_is_exec(e));
	assert_true(elfsym_find(e, "alpha", &s[0]));
	assert_true(s[0].found && s[0].func);
	assert_int_equal(s[0].value, BASE + TEXT_OFF + 4);
	assert_int_equal(s[0].size, 4);
	assert_int_equal(s[0].offset, TEXT_OFF + 4);
	/* the offset is where its bytes are */
	assert_int_equal(pread(elfsym_fd(e), bytes, 4, (off_t)s[0].offset), 4);
	assert_int_equal(bytes[0], 0xa4);
	/* several in one walk; an undefined one (an import) is not a definition */
	assert_int_equal(elfsym_lookup(e, names, 4, false, s), 2);
	assert_true(s[0].found && !s[0].func);
	assert_int_equal(s[0].offset, TEXT_OFF + 16);
	assert_false(s[1].found);
	assert_true(s[2].found);
	assert_false(s[3].found);
	/* only functions: beta is an object */
	assert_int_equal(elfsym_lookup(e, names, 4, true, s), 1);
	assert_false(s[0].found);
	assert_true(s[2].found && s[2].offset == TEXT_OFF + 4);
	assert_false(elfsym_find(e, "alph", &s[0]));
	assert_int_equal(elfsym_base_vaddr(e), BASE);
	elfsym_close(e);
	elfsym_close(NULL);
}

static void test_needed_and_runpath(void **state)
{
	char why[256], lib[64], rp[64];
	struct elfsym *e;

	(void)state;
	e = elfsym_open(put("good.so", obj, sizeof(obj)), why, sizeof(why));
	assert_non_null(e);
	assert_true(elfsym_needed(e, "libpython3.", lib, sizeof(lib), rp, sizeof(rp)));
	assert_string_equal(lib, "libpython3.12.so.1.0");
	/* RUNPATH wins over the RPATH before it, as in ld.so */
	assert_string_equal(rp, "$ORIGIN/../lib");
	assert_true(elfsym_needed(e, "lib", lib, sizeof(lib), rp, sizeof(rp)));
	assert_string_equal(lib, "libfoo.so"); /* the first that matches */
	assert_false(elfsym_needed(e, "libbar", lib, sizeof(lib), rp, sizeof(rp)));
	elfsym_close(e);
}

/* the C library this test runs with: a symbol's value is its address less
 * the library's load base */
static void test_libc_symbol_matches_the_loader(void **state)
{
	void *addr = dlsym(RTLD_DEFAULT, "getpid");
	struct elfsym_sym s;
	char why[512];
	struct elfsym *e;
	Dl_info info;

	(void)state;
	assert_non_null(addr);
	assert_true(dladdr(addr, &info) != 0);
	e = elfsym_open(info.dli_fname, why, sizeof(why));
	assert_non_null(e);
	assert_true(elfsym_find(e, "getpid", &s));
	assert_true(s.func);
	/* dli_fbase: where the segment at offset 0 was put */
	assert_int_equal(s.value - elfsym_base_vaddr(e),
			 (uintptr_t)addr - (uintptr_t)info.dli_fbase);
	assert_true(s.offset > 0);
	elfsym_close(e);
}

/* Many names at once, as the libc probes and the CUDA probes look them up:
 * through the library's GNU hash table, each value where the loader put it;
 * a variable is no function; a name it lacks is not found. */
static const char *const libc_names[] = {
    "read",    "write",	   "pread64", "pwrite64", "readv",	 "writev", "preadv",	  "pwritev",
    "preadv2", "pwritev2", "getpid",  "malloc",	  "getaddrinfo", "qsort",  "no_such_fn_x"};
#define N_LIBC_NAMES (sizeof(libc_names) / sizeof(libc_names[0]))

static void libc_file(char *path, size_t len)
{
	Dl_info info;

	assert_true(dladdr(dlsym(RTLD_DEFAULT, "getpid"), &info) != 0);
	snprintf(path, len, "%s", info.dli_fname);
}

static void check_libc_names(const char *path)
{
	struct elfsym_sym s[N_LIBC_NAMES], env;
	char why[512], lib[512];
	struct elfsym *e = elfsym_open(path, why, sizeof(why));
	Dl_info info;

	assert_non_null(e);
	libc_file(lib, sizeof(lib));
	assert_true(dladdr(dlsym(RTLD_DEFAULT, "getpid"), &info) != 0);
	assert_int_equal(elfsym_lookup(e, libc_names, N_LIBC_NAMES, true, s), N_LIBC_NAMES - 1);
	for (size_t i = 0; i + 1 < N_LIBC_NAMES; i++) {
		void *addr = dlsym(RTLD_DEFAULT, libc_names[i]);

		assert_true(s[i].found);
		assert_true(s[i].func);
		assert_true(s[i].offset > 0);
		if (addr && dladdr(addr, &info) && !strcmp(info.dli_fname, lib))
			assert_int_equal(s[i].value - elfsym_base_vaddr(e),
					 (uintptr_t)addr - (uintptr_t)info.dli_fbase);
	}
	assert_false(s[N_LIBC_NAMES - 1].found);
	/* environ: a variable, found as one, not as a function */
	assert_true(elfsym_find(e, "environ", &env));
	assert_false(env.func);
	assert_int_equal(elfsym_lookup(e, (const char *const[]){"environ"}, 1, true, &env), 0);
	elfsym_close(e);
}

static void test_libc_names_by_its_hash_table(void **state)
{
	char lib[512];

	(void)state;
	libc_file(lib, sizeof(lib));
	check_libc_names(lib);
}

/* The C library's bytes (*size of them, to free) and its GNU hash
 * table's section header in them */
static unsigned char *libc_bytes(size_t *size, const Elf64_Shdr **hash)
{
	char lib[512];
	unsigned char *b;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	long n;
	FILE *f;

	libc_file(lib, sizeof(lib));
	f = fopen(lib, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	b = malloc((size_t)n);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	eh = (const Elf64_Ehdr *)b;
	sh = (const Elf64_Shdr *)(b + eh->e_shoff);
	*hash = NULL;
	for (int i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_GNU_HASH)
			*hash = &sh[i];
	assert_non_null(*hash);
	*size = (size_t)n;
	return b;
}

/* The same answers from a copy whose GNU hash table is broken: zeroed (no
 * buckets: not used), or its bloom words and buckets all ones (chains
 * pointing past the table): .dynsym is walked instead. */
static void test_a_broken_hash_table_is_walked_past(void **state)
{
	const Elf64_Shdr *hash;
	size_t size;
	unsigned char *b = libc_bytes(&size, &hash);

	(void)state;
	{
		uint32_t *h = (uint32_t *)(b + hash->sh_offset);
		size_t head = 16 + 8 * (size_t)h[2] + 4 * (size_t)h[0];
		unsigned char *keep = malloc(head);

		assert_non_null(keep);
		memcpy(keep, h, head);
		memset(h, 0xff, head);
		h[0] = 1; /* one bucket, */
		h[1] = 1; /* symoffset 1, */
		h[2] = 1; /* one bloom word, */
		h[3] = 6; /* its shift: every name passes the bloom */
		check_libc_names(put("libc-hash-ones", b, size));
		memset(h, 0, head);
		check_libc_names(put("libc-hash-zero", b, size));
		memcpy(h, keep, head);
		free(keep);
	}
	/* intact again: the copy answers as the library does */
	check_libc_names(put("libc-hash-intact", b, size));
	free(b);
}

/* Random bytes written over the hash table (its words, buckets and
 * chains; 300 rounds, a fixed seed): each name is then either found with
 * the intact library's value or not found, never another symbol, and
 * nothing crashes (the reads stay inside the file). */
static void test_a_garbled_hash_table_gives_no_wrong_value(void **state)
{
	char why[512];
	struct elfsym_sym good[N_LIBC_NAMES], got[N_LIBC_NAMES];
	const Elf64_Shdr *hash;
	size_t size;
	unsigned char *b = libc_bytes(&size, &hash);
	const char *path;
	struct elfsym *e;
	int fd;

	(void)state;
	path = put("libc-garbled", b, size);
	e = elfsym_open(path, why, sizeof(why));
	assert_non_null(e);
	elfsym_lookup(e, libc_names, N_LIBC_NAMES, true, good);
	elfsym_close(e);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	srand(17);
	for (int round = 0; round < 300; round++) {
		uint64_t at = hash->sh_offset + (uint64_t)rand() % hash->sh_size;
		unsigned char junk[16];
		size_t n = 1 + (size_t)rand() % sizeof(junk);

		if (at + n > hash->sh_offset + hash->sh_size)
			n = (size_t)(hash->sh_offset + hash->sh_size - at);
		for (size_t i = 0; i < n; i++)
			junk[i] = (unsigned char)rand();
		assert_int_equal(pwrite(fd, junk, n, (off_t)at), (ssize_t)n);
		e = elfsym_open(path, why, sizeof(why));
		assert_non_null(e);
		elfsym_lookup(e, libc_names, N_LIBC_NAMES, true, got);
		elfsym_close(e);
		for (size_t k = 0; k < N_LIBC_NAMES; k++)
			if (got[k].found)
				assert_int_equal(got[k].value, good[k].value);
		/* back to intact for the next round */
		assert_int_equal(pwrite(fd, b + at, n, (off_t)at), (ssize_t)n);
	}
	close(fd);
	free(b);
}

/* ---- broken files ---- */

static void test_not_elf_is_a_clean_error(void **state)
{
	char why[512];

	(void)state;
	assert_null(elfsym_open("/nonexistent/libx.so", why, sizeof(why)));
	assert_non_null(strstr(why, strerror(ENOENT)));
	assert_null(elfsym_open(put("empty.so", "", 0), why, sizeof(why)));
	assert_non_null(strstr(why, "not an ELF file"));
	assert_null(elfsym_open(put("text.so", "#!/bin/sh\necho hi\n", 18), why, sizeof(why)));
	assert_non_null(strstr(why, "not an ELF file"));
	/* the magic and nothing else */
	assert_null(elfsym_open(put("magic.so", ELFMAG, SELFMAG), why, sizeof(why)));
	assert_non_null(strstr(why, "not an ELF file"));
	assert_null(elfsym_open(top, why, sizeof(why))); /* a directory */
}

/* Whatever opens gives the right answer or none. */
static void check_no_wrong_answer(const char *path)
{
	struct elfsym_sym s;
	char why[512], lib[64], rp[64];
	struct elfsym *e = elfsym_open(path, why, sizeof(why));

	if (!e) {
		assert_true(why[0] != 0);
		return;
	}
	if (elfsym_find(e, "alpha", &s)) {
		assert_int_equal(s.value, BASE + TEXT_OFF + 4);
		assert_true(s.offset == 0 || s.offset == TEXT_OFF + 4);
	}
	if (elfsym_needed(e, "libpython3.", lib, sizeof(lib), rp, sizeof(rp)))
		assert_string_equal(lib, "libpython3.12.so.1.0");
	(void)elfsym_base_vaddr(e);
	elfsym_close(e);
}

static void test_truncated_at_every_length(void **state)
{
	(void)state;
	for (size_t len = 0; len < sizeof(obj); len++) {
		const char *p = put("cut.so", obj, len);
		struct elfsym_sym s;
		char why[512];
		struct elfsym *e;

		check_no_wrong_answer(p);
		/* the section headers are the file's end: any cut loses the
		 * symbol table */
		e = elfsym_open(p, why, sizeof(why));
		if (len < sizeof(Elf64_Ehdr))
			assert_null(e);
		if (e)
			assert_false(elfsym_find(e, "alpha", &s));
		elfsym_close(e);
	}
}

static void test_tables_pointing_outside(void **state)
{
	unsigned char b[FILE_SIZE];
	struct elfsym_sym s;
	char why[512];
	struct elfsym *e;

	(void)state;
	/* .dynsym's data beyond the end of the file */
	build(b);
	shdr(b, S_DYNSYM)->sh_offset = 1u << 30;
	check_no_wrong_answer(put("far.so", b, sizeof(b)));
	e = elfsym_open(put("far.so", b, sizeof(b)), why, sizeof(why));
	if (e)
		assert_false(elfsym_find(e, "alpha", &s));
	elfsym_close(e);
	/* a size that does not fit */
	build(b);
	shdr(b, S_DYNSYM)->sh_size = 0xffffffffffffull;
	check_no_wrong_answer(put("big.so", b, sizeof(b)));
	/* no entry size: skipped, not a division by zero */
	build(b);
	shdr(b, S_DYNSYM)->sh_entsize = 0;
	e = elfsym_open(put("zero.so", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_false(elfsym_find(e, "alpha", &s));
	elfsym_close(e);
	/* the string table's index out of range: no names */
	build(b);
	shdr(b, S_DYNSYM)->sh_link = 99;
	shdr(b, S_DYNAMIC)->sh_link = 99;
	e = elfsym_open(put("link.so", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_false(elfsym_find(e, "alpha", &s));
	assert_false(elfsym_needed(e, "lib", why, 64, why + 64, 64));
	elfsym_close(e);
	/* a name past the end of the strings */
	build(b);
	sym(b, 1)->st_name = 4096;
	e = elfsym_open(put("name.so", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_false(elfsym_find(e, "alpha", &s));
	assert_true(elfsym_find(e, "beta", &s)); /* the others still are */
	elfsym_close(e);
	/* a symbol in a section that does not exist, or outside its section:
	 * its value, but no file offset */
	build(b);
	sym(b, 1)->st_shndx = 50;
	e = elfsym_open(put("shndx.so", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_true(elfsym_find(e, "alpha", &s));
	assert_int_equal(s.value, BASE + TEXT_OFF + 4);
	assert_int_equal(s.offset, 0);
	elfsym_close(e);
	build(b);
	sym(b, 1)->st_value = BASE + 0x9000;
	e = elfsym_open(put("value.so", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_true(elfsym_find(e, "alpha", &s));
	assert_int_equal(s.offset, 0);
	elfsym_close(e);
	/* more section headers than the file holds */
	build(b);
	((Elf64_Ehdr *)b)->e_shnum = 0xff00;
	check_no_wrong_answer(put("shnum.so", b, sizeof(b)));
	/* section headers past the end */
	build(b);
	((Elf64_Ehdr *)b)->e_shoff = 1u << 30;
	check_no_wrong_answer(put("shoff.so", b, sizeof(b)));
	/* program headers past the end: no base */
	build(b);
	((Elf64_Ehdr *)b)->e_phoff = 1u << 30;
	e = elfsym_open(put("phoff.so", b, sizeof(b)), why, sizeof(why));
	if (e)
		assert_int_equal(elfsym_base_vaddr(e), 0);
	elfsym_close(e);
}

/* Bytes changed anywhere: any answer may be what the file now says, so
 * only this: no crash, no read outside the file (the ASan build). */
static void test_random_bytes_after_a_header(void **state)
{
	unsigned char b[FILE_SIZE];
	const char *names[] = {"alpha", "beta", "undef"};
	struct elfsym_sym s[3];
	char why[512], lib[64], rp[64];

	(void)state;
	srand(18);
	for (int round = 0; round < 200; round++) {
		build(b);
		/* flip bytes anywhere after the ELF header */
		for (int k = 0; k < 8; k++)
			b[sizeof(Elf64_Ehdr) + (size_t)rand() % (sizeof(b) - sizeof(Elf64_Ehdr))] =
			    (unsigned char)rand();
		struct elfsym *e = elfsym_open(put("rand.so", b, sizeof(b)), why, sizeof(why));

		if (!e)
			continue;
		(void)elfsym_lookup(e, names, 3, round & 1, s);
		(void)elfsym_needed(e, "lib", lib, sizeof(lib), rp, sizeof(rp));
		(void)elfsym_base_vaddr(e);
		elfsym_close(e);
	}
}

/* ---- USDT notes: a second object, an executable with .note.stapsdt ---- */

#define N_BASE	   0x400000ULL
#define N_NOTE_OFF 0x100
#define N_SBASE	   0x300 /* .stapsdt.base: where it is; the notes say 0x10 lower */
#define N_SHSTR	   0x310
#define N_SHDR	   0x380
#define N_SIZE	   (N_SHDR + 4 * sizeof(Elf64_Shdr))

static const char n_shstr[] = "\0.note.stapsdt\0.stapsdt.base\0.shstrtab";

/* one note at b: its length */
static size_t note(unsigned char *b, const char *prov, const char *name, const char *args,
		   uint64_t pc, uint64_t sema)
{
	size_t pl = strlen(prov) + 1, nl = strlen(name) + 1, al = strlen(args) + 1;
	size_t desc = 24 + pl + nl + al;
	Elf64_Nhdr nh = {8, (Elf64_Word)desc, 3};
	uint64_t base = N_BASE + N_SBASE - 0x10;
	unsigned char *d = b + sizeof(nh) + 8;

	memcpy(b, &nh, sizeof(nh));
	memcpy(b + sizeof(nh), "stapsdt", 8);
	memcpy(d, &pc, 8);
	memcpy(d + 8, &base, 8);
	memcpy(d + 16, &sema, 8);
	memcpy(d + 24, prov, pl);
	memcpy(d + 24 + pl, name, nl);
	memcpy(d + 24 + pl + nl, args, al);
	return sizeof(nh) + 8 + ((desc + 3) & ~(size_t)3);
}

static void build_notes(unsigned char *b)
{
	size_t n = 0;

	header(b, ET_EXEC, N_BASE, N_SIZE, N_SHDR, 4, 3);
	/* another provider's probe of the same name first; the probe's
	 * address as linked (0x10 below where .stapsdt.base says it is) */
	n += note(b + N_NOTE_OFF + n, "other", "import__find__load__done", "4@%eax",
		  N_BASE + 0x70 - 0x10, 0);
	n += note(b + N_NOTE_OFF + n, "python", "import__find__load__done", "8@%rax -4@%edx",
		  N_BASE + 0x50 - 0x10, N_BASE + 0x60);
	memcpy(b + N_SHSTR, n_shstr, sizeof(n_shstr));
	*(Elf64_Shdr *)(b + N_SHDR + sizeof(Elf64_Shdr)) = (Elf64_Shdr){.sh_name = 1,
									.sh_type = SHT_NOTE,
									.sh_offset = N_NOTE_OFF,
									.sh_size = n,
									.sh_addralign = 4};
	*(Elf64_Shdr *)(b + N_SHDR + 2 * sizeof(Elf64_Shdr)) =
	    (Elf64_Shdr){.sh_name = 15,
			 .sh_type = SHT_PROGBITS,
			 .sh_flags = SHF_ALLOC,
			 .sh_addr = N_BASE + N_SBASE,
			 .sh_offset = N_SBASE,
			 .sh_size = 1,
			 .sh_addralign = 1};
	*(Elf64_Shdr *)(b + N_SHDR + 3 * sizeof(Elf64_Shdr)) =
	    (Elf64_Shdr){.sh_name = 29,
			 .sh_type = SHT_STRTAB,
			 .sh_offset = N_SHSTR,
			 .sh_size = sizeof(n_shstr),
			 .sh_addralign = 1};
}

static void test_usdt_note_offsets_and_arguments(void **state)
{
	unsigned char b[N_SIZE];
	struct elfsym_usdt u;
	char why[512];
	struct elfsym *e;

	(void)state;
	build_notes(b);
	e = elfsym_open(put("sdt", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	/* the python provider's, not the other's; the probe moved with
	 * .stapsdt.base; file offsets through the segment */
	assert_true(elfsym_usdt(e, "python", "import__find__load__done", &u));
	assert_int_equal(u.offset, 0x50);
	assert_int_equal(u.sema_offset, 0x60);
	assert_string_equal(u.args, "8@%rax -4@%edx");
	assert_true(elfsym_usdt(e, "other", "import__find__load__done", &u));
	assert_int_equal(u.offset, 0x70);
	assert_int_equal(u.sema_offset, 0);
	assert_false(elfsym_usdt(e, "python", "import__find__load__start", &u));
	assert_int_equal(u.offset, 0);
	elfsym_close(e);
	/* an address in no segment: no probe, not a wrong offset */
	((Elf64_Phdr *)(b + sizeof(Elf64_Ehdr)))->p_vaddr = 0x800000;
	e = elfsym_open(put("sdt-far", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_false(elfsym_usdt(e, "python", "import__find__load__done", &u));
	elfsym_close(e);
	/* cut anywhere: the section headers are the end, so nothing is found */
	build_notes(b);
	for (size_t len = 0; len < sizeof(b); len++) {
		e = elfsym_open(put("sdt-cut", b, len), why, sizeof(why));
		if (e)
			assert_false(elfsym_usdt(e, "python", "import__find__load__done", &u));
		elfsym_close(e);
	}
	/* a note whose strings run past its end */
	build_notes(b);
	((Elf64_Nhdr *)(b + N_NOTE_OFF))->n_descsz = 26; /* the first note: "other" cut to "ot" */
	e = elfsym_open(put("sdt-short", b, sizeof(b)), why, sizeof(why));
	assert_non_null(e);
	assert_false(elfsym_usdt(e, "other", "import__find__load__done", &u));
	elfsym_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_symbols_values_and_file_offsets),
	    cmocka_unit_test(test_needed_and_runpath),
	    cmocka_unit_test(test_libc_symbol_matches_the_loader),
	    cmocka_unit_test(test_libc_names_by_its_hash_table),
	    cmocka_unit_test(test_a_broken_hash_table_is_walked_past),
	    cmocka_unit_test(test_a_garbled_hash_table_gives_no_wrong_value),
	    cmocka_unit_test(test_not_elf_is_a_clean_error),
	    cmocka_unit_test(test_truncated_at_every_length),
	    cmocka_unit_test(test_tables_pointing_outside),
	    cmocka_unit_test(test_random_bytes_after_a_header),
	    cmocka_unit_test(test_usdt_note_offsets_and_arguments),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
