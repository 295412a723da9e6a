/* heapreserve: the launcher's heap made ready, while the service starts,
 * for what the launcher allocates at the service's exit.
 *
 * The timeline built at the exit allocates a few MiB (the paths and files
 * maps' copies, the model, the JSON). Each page of fresh memory costs a
 * page fault at its first write: ~10 us each on a VM with shadow paging
 * (measured here: 10.4 us a page touched, 0.8 us a page populated by
 * madvise(MADV_POPULATE_WRITE), then 5 us for the first touch of it), ~500
 * faults, 8 ms of the 40 ms between the service's exit and tts-launch's.
 * heap_reserve touches that much heap early, while the launcher waits
 * anyway (in transparent huge pages where it can: 2 MiB a fault), and
 * tells glibc's malloc to keep it: freed memory stays in the
 * heap (M_TRIM_THRESHOLD) and buffers up to the reserve's size come from
 * the heap, not from fresh mmaps (M_MMAP_THRESHOLD). The price: the
 * launcher's RSS keeps the reserve from then on (BENCHMARKS.md). */
#ifndef TTS_HEAPRESERVE_H
#define TTS_HEAPRESERVE_H

#include <stddef.h>

/* what supervise.c reserves once the service runs under tracing */
#define HEAP_RESERVE_BYTES (4u << 20)

/* Touches bytes of the main heap and keeps them in it, as above; call it
 * from the thread that will allocate (the main arena: the main thread).
 * Returns the pages touched, 0 when nothing was done (bytes 0 or over
 * 8 MiB, an allocator that takes no mallopt, as a sanitizer's, or no
 * memory). */
size_t heap_reserve(size_t bytes);

#endif
