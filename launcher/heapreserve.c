/* heapreserve: see heapreserve.h. */
#include "heapreserve.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

size_t heap_reserve(size_t bytes)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start, end;
	size_t pages = 0;
	char *p;

	if (!bytes || bytes > (8u << 20) || pg <= 0)
		return 0;
	/* mallopt returns 1 on success: glibc keeps a freed top of up to
	 * twice the reserve, and allocates below twice the reserve from the
	 * heap (the reserve itself included); it stops glibc's own
	 * adjustment of both thresholds */
	if (mallopt(M_TRIM_THRESHOLD, (int)(bytes * 2)) != 1 ||
	    mallopt(M_MMAP_THRESHOLD, (int)(bytes * 2)) != 1)
		return 0;
	p = malloc(bytes);
	if (!p)
		return 0;
	start = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	end = ((uintptr_t)p + bytes) & ~((uintptr_t)pg - 1);
	if (end > start) {
		uintptr_t huge = 2u << 20, hs = (start + huge - 1) & ~(huge - 1),
			  he = end & ~(huge - 1);

		/* the 2 MiB-aligned part in huge pages where transparent huge
		 * pages are on (or on madvise, as Debian's default): one fault
		 * for 512 pages, here and in the hypervisor */
		if (he > hs)
			madvise((void *)hs, he - hs, MADV_HUGEPAGE);
		/* the rest in one call instead of a fault a page (fails
		 * harmlessly on a kernel without it); the write after it maps
		 * each page for the CPU, where a hypervisor shadows the page
		 * tables */
		madvise((void *)start, end - start, MADV_POPULATE_WRITE);
		for (uintptr_t q = start; q < end; q += (uintptr_t)pg, pages++)
			*(volatile char *)q = 0;
	}
	free(p); /* into the heap's top, kept there (M_TRIM_THRESHOLD) */
	return pages;
}
