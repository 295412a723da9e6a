/* elfsym: what the launcher reads of an ELF file's dynamic part, in one
 * place: a defined dynamic symbol's value and the file offset of its bytes
 * (a uprobe's offset; where a variable's initial value lies), several names
 * looked up at once (by the GNU hash table, else in one walk of .dynsym),
 * the DT_NEEDED entry that starts with a prefix and the RUNPATH/RPATH, and
 * the vaddr of the segment at file offset 0. Used by gpu.c (which CUDA
 * library exports what, and where), pyframes.c (where _PyRuntime and
 * Py_Version are) and tracer_libcio.c (libc's read/write family).
 *
 * Malformed or truncated files are errors, never a crash: elfsym_open says
 * why, a lookup in a file whose tables do not fit in it finds nothing. */
#ifndef TTS_ELFSYM_H
#define TTS_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elfsym;

/* path opened (read-only, close-on-exec) and its ELF header checked; NULL
 * with the reason in why ("PATH: not an ELF file", strerror of the open). */
struct elfsym *elfsym_open(const char *path, char *why, size_t whylen);
void elfsym_close(struct elfsym *e); /* NULL is fine */

/* The open file (for pread of a symbol's bytes). */
int elfsym_fd(const struct elfsym *e);
/* e_machine (EM_X86_64, ...), and whether it is ET_EXEC (fixed addresses). */
int elfsym_machine(const struct elfsym *e);
bool elfsym_is_exec(const struct elfsym *e);

struct elfsym_sym {
	bool found;
	bool func;	 /* STT_FUNC or STT_GNU_IFUNC */
	uint64_t value;	 /* st_value */
	uint64_t size;	 /* st_size */
	uint64_t offset; /* file offset of its bytes; 0: none (SHT_NOBITS, bad section) */
};

/* names[0..n) looked up among the defined (not SHN_UNDEF) symbols of
 * .dynsym, by its GNU hash table when it has one that can be trusted, else
 * in one walk; out[i] for names[i] (the first definition met).
 * Returns how many were found. funcs_only: only functions count. */
int elfsym_lookup(struct elfsym *e, const char *const *names, size_t n, bool funcs_only,
		  struct elfsym_sym *out);
/* One name; false when absent. */
bool elfsym_find(struct elfsym *e, const char *name, struct elfsym_sym *out);

/* The first DT_NEEDED that starts with prefix (into lib), and the RUNPATH
 * (else RPATH; "" when none, into runpath); false when no such DT_NEEDED. */
bool elfsym_needed(struct elfsym *e, const char *prefix, char *lib, size_t liblen, char *runpath,
		   size_t rplen);

/* The p_vaddr of the PT_LOAD at file offset 0 (0 when none). */
uint64_t elfsym_base_vaddr(struct elfsym *e);

/* A SystemTap USDT probe (a note of .note.stapsdt), as a uprobe needs it */
struct elfsym_usdt {
	uint64_t offset;      /* file offset of the probe's instruction */
	uint64_t sema_offset; /* file offset of its semaphore (the uprobe's
				 ref_ctr_offset); 0: none */
	char args[128];	      /* its argument string ("8@%rax -4@%edx") */
};

/* The first note of provider:name; false when there is none, or its
 * addresses lie in no loaded segment of the file. */
bool elfsym_usdt(struct elfsym *e, const char *provider, const char *name, struct elfsym_usdt *out);

#endif
