/* pyframes: the interpreter whose frames the kernel side reads; see
 * pyframes.h. */
#include "pyframes.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PY_3_11 0x030b /* Py_Version >> 16 */

/* The value (address) of a dynamic symbol, and the file offset of its
 * bytes; false when absent. */
static bool dynsym(Elf *elf, const char *name, uint64_t *addr, uint64_t *off)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF)
				continue;
			n = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!n || strcmp(n, name))
				continue;
			*addr = s.st_value;
			/* the section holding it: its file offset */
			{
				Elf_Scn *in = elf_getscn(elf, s.st_shndx);
				GElf_Shdr ish;

				*off = in && gelf_getshdr(in, &ish) && ish.sh_type != SHT_NOBITS
					   ? ish.sh_offset + (s.st_value - ish.sh_addr)
					   : 0;
			}
			return true;
		}
	}
	return false;
}

static bool check_one(const char *path, struct pyframes_target *out, char *why, size_t whylen)
{
	uint64_t rt, rt_off, ver_addr, ver_off;
	uint32_t ver = 0;
	struct stat st;
	GElf_Ehdr eh;
	Elf *elf = NULL;
	bool ok = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		goto done;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || !gelf_getehdr(elf, &eh)) {
		snprintf(why, whylen, "%s: not an ELF file", path);
		goto done;
	}
	if (!dynsym(elf, "_PyRuntime", &rt, &rt_off)) {
		snprintf(why, whylen,
			 "%s has no _PyRuntime among its dynamic symbols (a libpython3.x.so "
			 "build, or one that does not export it: not read yet); its cpu and "
			 "sleep are named without Python functions",
			 path);
		goto done;
	}
	if (!dynsym(elf, "Py_Version", &ver_addr, &ver_off) || !ver_off ||
	    pread(fd, &ver, sizeof(ver), (off_t)ver_off) != sizeof(ver) || ver >> 16 != PY_3_11) {
		snprintf(
		    why, whylen,
		    "%s is not CPython 3.11 (Py_Version %#x): its frame layout is not read yet",
		    path, ver);
		goto done;
	}
	if (eh.e_type != ET_EXEC) {
		snprintf(why, whylen,
			 "%s is position-independent (its _PyRuntime moves per process): not read "
			 "yet",
			 path);
		goto done;
	}
	out->runtime = rt;
	/* the kernel's dev_t (MKDEV: major << 20 | minor), as s_dev */
	out->dev = ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev);
	out->ino = st.st_ino;
	snprintf(out->path, sizeof(out->path), "%s", path);
	ok = true;
done:
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return ok;
}

bool pyframes_find(char paths[][PATH_MAX], int n, struct pyframes_target *out, char *why,
		   size_t whylen)
{
	memset(out, 0, sizeof(*out));
	snprintf(why, whylen, "no python interpreter found");
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(why, whylen, "libelf: %s", elf_errmsg(-1));
		return false;
	}
	for (int i = 0; i < n; i++)
		if (check_one(paths[i], out, why, whylen))
			return true;
	return false;
}
