/* cudaprobe: the calls PyTorch makes when it probes for a GPU, made on a CUDA
 * runtime library, for tests/e2e/test_gpu.py (issue 18).
 *
 *   cudaprobe LIB     dlopen LIB after main starts (as PyTorch loads the
 *                     libcudart of site-packages/nvidia/cuda_runtime/lib)
 *   cudaprobe-linked  built with -lcudart: the runtime is mapped before main
 *
 * The calls, in order: cudaDriverGetVersion, cudaRuntimeGetVersion (which
 * answers without a driver), cudaGetDeviceCount, cudaSetDevice(0),
 * cudaFree(0) (the runtime's init idiom), cudaGetDeviceProperties(0) and
 * cudaMemGetInfo (what a service asks of its device: name, total, free),
 * cudaMalloc(1 MiB), a 64 KiB host-to-device cudaMemcpy, cudaFree of the
 * block. Each is printed as "name=<cudaError_t>" on stdout; without a driver
 * each but the two version queries returns cudaErrorInsufficientDriver (35)
 * (the runtime's version is its own answer), and the copy and free are
 * made anyway. Exit 0.
 *
 * CUDAPROBE_GATE=DIR (tests of a held mapping): before it loads the library,
 * write DIR/pid and wait until DIR/go exists.
 *
 * CUDAPROBE_ALLOCATORS=DRIVER (the other allocators PyTorch may use): then
 * cudaMallocAsync(2 MiB) and cudaFreeAsync of it on the runtime, and on the
 * driver library DRIVER (dlopened: "libcuda.so.1" is the one the runtime
 * loaded) cuMemAllocAsync(2 MiB), cuMemFreeAsync, cuMemCreate(2 MiB of
 * device 0's memory) and cuMemRelease of its handle; printed the same way
 * ("cuMemCreate=<CUresult>"). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_trace.h"

/* bpf/gpu.bpf.c reads the device's name and total memory out of the
 * cudaDeviceProp the caller passed at these offsets: the toolkit's own
 * layout must agree (built only where the toolkit exists) */
_Static_assert(offsetof(struct cudaDeviceProp, name) == GPU_PROP_NAME_OFF,
	       "cudaDeviceProp.name moved: fix GPU_PROP_NAME_OFF in bpf/gpu_trace.h");
_Static_assert(offsetof(struct cudaDeviceProp, totalGlobalMem) == GPU_PROP_TOTAL_MEM_OFF,
	       "cudaDeviceProp.totalGlobalMem moved: fix GPU_PROP_TOTAL_MEM_OFF in "
	       "bpf/gpu_trace.h");

/* CUDAPROBE_GATE: say the pid, wait for DIR/go */
static void gate(void)
{
	const char *d = getenv("CUDAPROBE_GATE");
	struct timespec tick = {0, 10 * 1000 * 1000};
	char p[4200];
	FILE *f;

	if (!d)
		return;
	snprintf(p, sizeof(p), "%s/pid.tmp", d);
	f = fopen(p, "w");
	if (f) {
		char q[4200];

		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
		snprintf(q, sizeof(q), "%s/pid", d);
		rename(p, q);
	}
	snprintf(p, sizeof(p), "%s/go", d);
	while (access(p, F_OK))
		nanosleep(&tick, NULL);
}

struct api {
	__typeof__(cudaDriverGetVersion) *driver_version;
	__typeof__(cudaRuntimeGetVersion) *runtime_version;
	__typeof__(cudaGetDeviceCount) *device_count;
	__typeof__(cudaSetDevice) *set_device;
	__typeof__(cudaFree) *free_;
	__typeof__(cudaMalloc) *malloc_;
	__typeof__(cudaMemcpy) *memcpy_;
	__typeof__(cudaGetDeviceProperties) *props;
	__typeof__(cudaMemGetInfo) *mem_info;
	__typeof__(cudaMallocAsync) *malloc_async;
	__typeof__(cudaFreeAsync) *free_async;
};

#ifdef CUDAPROBE_LINKED
static int load(struct api *a, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	a->driver_version = cudaDriverGetVersion;
	a->runtime_version = cudaRuntimeGetVersion;
	a->device_count = cudaGetDeviceCount;
	a->set_device = cudaSetDevice;
	a->free_ = cudaFree;
	a->malloc_ = cudaMalloc;
	a->memcpy_ = cudaMemcpy;
	a->props = cudaGetDeviceProperties;
	a->mem_info = cudaMemGetInfo;
	a->malloc_async = cudaMallocAsync;
	a->free_async = cudaFreeAsync;
	return 0;
}
#else
static int load(struct api *a, int argc, char **argv)
{
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: cudaprobe LIBCUDART\n");
		return -1;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cudaprobe: failed to load %s: %s\n", argv[1], dlerror());
		return -1;
	}
	a->driver_version = (__typeof__(a->driver_version))dlsym(h, "cudaDriverGetVersion");
	a->runtime_version = (__typeof__(a->runtime_version))dlsym(h, "cudaRuntimeGetVersion");
	a->device_count = (__typeof__(a->device_count))dlsym(h, "cudaGetDeviceCount");
	a->set_device = (__typeof__(a->set_device))dlsym(h, "cudaSetDevice");
	a->free_ = (__typeof__(a->free_))dlsym(h, "cudaFree");
	a->malloc_ = (__typeof__(a->malloc_))dlsym(h, "cudaMalloc");
	a->memcpy_ = (__typeof__(a->memcpy_))dlsym(h, "cudaMemcpy");
	a->props = (__typeof__(a->props))dlsym(h, "cudaGetDeviceProperties");
	a->mem_info = (__typeof__(a->mem_info))dlsym(h, "cudaMemGetInfo");
	a->malloc_async = (__typeof__(a->malloc_async))dlsym(h, "cudaMallocAsync");
	a->free_async = (__typeof__(a->free_async))dlsym(h, "cudaFreeAsync");
	if (!a->driver_version || !a->runtime_version || !a->device_count || !a->set_device ||
	    !a->free_ || !a->malloc_ || !a->memcpy_ || !a->props || !a->mem_info ||
	    !a->malloc_async || !a->free_async) {
		fprintf(stderr, "cudaprobe: %s lacks the runtime API\n", argv[1]);
		return -1;
	}
	return 0;
}
#endif

/* CUDAPROBE_ALLOCATORS: the asynchronous and the virtual memory allocators */
static int allocators(const struct api *a, const char *driver)
{
	__typeof__(cuMemAllocAsync) *alloc_async;
	__typeof__(cuMemFreeAsync) *free_async;
	__typeof__(cuMemCreate) *create;
	__typeof__(cuMemRelease) *release;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	CUmemGenericAllocationHandle handle = 0;
	CUdeviceptr dptr = 0;
	void *dev = NULL, *h;

	printf("cudaMallocAsync=%d\n", (int)a->malloc_async(&dev, 2 << 20, 0));
	printf("cudaFreeAsync=%d\n", (int)a->free_async(dev, 0));
	h = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cudaprobe: failed to load %s: %s\n", driver, dlerror());
		return -1;
	}
	alloc_async = (__typeof__(alloc_async))dlsym(h, "cuMemAllocAsync");
	free_async = (__typeof__(free_async))dlsym(h, "cuMemFreeAsync");
	create = (__typeof__(create))dlsym(h, "cuMemCreate");
	release = (__typeof__(release))dlsym(h, "cuMemRelease");
	if (!alloc_async || !free_async || !create || !release) {
		fprintf(stderr, "cudaprobe: %s lacks the driver's allocators\n", driver);
		return -1;
	}
	printf("cuMemAllocAsync=%d\n", (int)alloc_async(&dptr, 2 << 20, NULL));
	printf("cuMemFreeAsync=%d\n", (int)free_async(dptr, NULL));
	printf("cuMemCreate=%d\n", (int)create(&handle, 2 << 20, &prop, 0));
	printf("cuMemRelease=%d\n", (int)release(handle));
	return 0;
}

int main(int argc, char **argv)
{
	static char host[64 << 10];
	static struct cudaDeviceProp prop;
	struct api a;
	void *dev = NULL;
	size_t mfree = 0, mtotal = 0;
	int v = 0, n = 0, r;

	gate();
	if (load(&a, argc, argv))
		return 2;
	memset(host, 1, sizeof(host));
	printf("cudaDriverGetVersion=%d\n", (int)a.driver_version(&v));
	r = (int)a.runtime_version(&v); /* before v is read: printf's arguments are unordered */
	printf("cudaRuntimeGetVersion=%d version=%d\n", r, v);
	r = (int)a.device_count(&n);
	printf("cudaGetDeviceCount=%d count=%d\n", r, n);
	printf("cudaSetDevice=%d\n", (int)a.set_device(0));
	printf("cudaFree0=%d\n", (int)a.free_(NULL));
	printf("cudaGetDeviceProperties=%d\n", (int)a.props(&prop, 0));
	printf("cudaMemGetInfo=%d\n", (int)a.mem_info(&mfree, &mtotal));
	printf("cudaMalloc=%d\n", (int)a.malloc_(&dev, 1 << 20));
	printf("cudaMemcpy=%d\n", (int)a.memcpy_(dev, host, sizeof(host), cudaMemcpyHostToDevice));
	printf("cudaFree=%d\n", (int)a.free_(dev));
	if (getenv("CUDAPROBE_ALLOCATORS") && allocators(&a, getenv("CUDAPROBE_ALLOCATORS")))
		return 2;
	return 0;
}
