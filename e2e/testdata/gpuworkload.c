/*
 * gpuworkload.c - the process the node-side end-to-end tests run in real
 * containers. It reaches the driver as CUDA runtimes do (dlopen of
 * libcuda.so.1 and libnvidia-ml.so.1, cuGetProcAddress), with libvgpu
 * preloaded by the container's /etc/ld.so.preload, and prints what it saw
 * as "key=value" lines. Modes:
 *
 *   fill CHUNK_MIB           allocate chunks until refused; print the total
 *                            and the refusal's CUresult; hold until killed
 *   procs N EACH_MIB         N processes hold EACH_MIB each; a further
 *                            allocation is refused, then granted once the
 *                            first is SIGKILLed
 *   spin SECONDS             launch kernels back to back for SECONDS
 *   nvml                     print NVML's memory figures and process list
 *   devices [once]           print the devices CUDA and NVML list, with
 *                            each CUDA device's memory; hold until killed
 *                            (once: exit 0, as an init container does)
 *   overcommit CHUNK_MIB     with the card full: one request of each
 *                            other allocation family (2 x CHUNK_MIB) and
 *                            its CUresult, then chunks until refused and
 *                            the total with the refusal's CUresult, then
 *                            every successful allocation freed, how many
 *                            frees failed; hold until killed
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static void *cuda, *nvml;
static CUresult (*gpa)(const char *, void **, int, unsigned long long, int *);

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (p == NULL) {
		printf("error=no %s\n", name);
		exit(3);
	}
	return p;
}

/* Entry points as cudart takes them: cuGetProcAddress_v2 at CUDA 12.0. */
static void *proc(const char *name)
{
	void *fn = NULL;
	int status = 0;
	if (gpa(name, &fn, 12000, 0, &status) != 0 || fn == NULL) {
		printf("error=cuGetProcAddress %s\n", name);
		exit(3);
	}
	return fn;
}

static void context(void)
{
	CUresult (*init)(unsigned) = proc("cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain");
	CUresult (*set)(CUcontext) = proc("cuCtxSetCurrent");
	CUcontext ctx;
	if (init(0) != 0 || retain(&ctx, 0) != 0 || set(ctx) != 0) {
		printf("error=no context\n");
		exit(3);
	}
}

/* Allocates CHUNK MiB pieces until refused; returns MiB allocated. */
static unsigned fill(unsigned chunk, CUresult *last)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	unsigned total = 0;
	while ((*last = alloc(&p, (size_t)chunk << 20)) == 0)
		total += chunk;
	return total;
}

static int mode_fill(unsigned chunk)
{
	CUresult last;
	context();
	unsigned total = fill(chunk, &last);
	printf("allocated_mib=%u\nrefused=%d\n", total, last);
	fflush(stdout);
	pause();
	return 0;
}

/* CUDA's CUmemAllocationProp and CUDA_ARRAY_DESCRIPTOR (cuda.h), as far as used here. */
typedef struct {
	int type, requested_handle_types;
	struct { int type, id; } location;
	void *win32;
	unsigned char flags[8];
} mem_prop;
typedef struct { size_t width, height; int format; unsigned channels; } array_desc;

/*
 * The families libvgpu keeps on the card's refusal (libvgpu/src/host.c):
 * each asks for `bytes` past what the full card has; prints its CUresult.
 */
static void refused_families(size_t bytes)
{
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned) = proc("cuMemAllocManaged");
	CUresult (*async)(CUdeviceptr *, size_t, void *) = proc("cuMemAllocAsync");
	CUresult (*create)(unsigned long long *, size_t, const mem_prop *, unsigned long long) = proc("cuMemCreate");
	CUresult (*array)(void **, const array_desc *) = proc("cuArrayCreate");
	CUdeviceptr p;
	unsigned long long h;
	void *a;
	mem_prop prop = {.type = 1, .location = {1, 0}};       /* pinned, on device 0 */
	array_desc desc = {4096, bytes / 4096 / 16, 0x20, 4};    /* float4 texels */
	printf("managed=%d\n", managed(&p, bytes, 1));
	printf("async=%d\n", async(&p, bytes, NULL));
	printf("vmm=%d\n", create(&h, bytes, &prop, 0));
	printf("array=%d\n", array(&a, &desc));
}

/*
 * Past the card, within the share: with the card full, libvgpu serves
 * linear memory (cuMemAlloc, cuMemAllocPitch) from host memory
 * (CUDA_OVERSUBSCRIBE) and the other families keep the card's refusal.
 * Fills to the share, then gives everything back; the test reads the
 * driver's peaks for the first part and its current figures for the second.
 */
static int mode_overcommit(unsigned chunk)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUresult (*pitched)(CUdeviceptr *, size_t *, size_t, size_t, unsigned) = proc("cuMemAllocPitch");
	CUresult (*release)(CUdeviceptr) = proc("cuMemFree");
	static CUdeviceptr held[8192];
	unsigned n = 0, failed = 0;
	size_t pitch = 0, bytes = (size_t)2 * chunk << 20;
	CUresult last = 0;
	context();
	refused_families(bytes);
	/* Rows of 1000 bytes, as many as make the two chunks at a 1024-byte pitch. */
	CUresult r = pitched(&held[n], &pitch, 1000, bytes / 1024, 4);
	printf("pitch=%d\npitch_bytes=%zu\n", r, r == 0 ? pitch * (bytes / 1024) : 0);
	n += r == 0;
	unsigned first = n;
	while (n < sizeof(held) / sizeof(held[0]) && (last = alloc(&held[n], (size_t)chunk << 20)) == 0)
		n++;
	printf("allocated_mib=%u\nrefused=%d\n", (n - first) * chunk, last);
	fflush(stdout);
	for (unsigned i = 0; i < n; i++)
		failed += release(held[i]) != 0;
	printf("free_failures=%u\n", failed);
	fflush(stdout);
	pause();
	return 0;
}

/* A child of procs: a context and one allocation of `mib`; its result on fd w; holds. */
static void hold_one(int w, unsigned mib)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	context();
	CUresult r = alloc(&p, (size_t)mib << 20);
	if (write(w, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	pause();
	_exit(0);
}

/*
 * N processes of the container hold EACH MiB each through its one region;
 * a further allocation of EACH is refused while they do, and granted once
 * the first of them is SIGKILLed.
 */
static int mode_procs(int n, unsigned each)
{
	int fds[2], pids[16], ok = 0;
	CUresult r;
	if (n > 16 || pipe(fds) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		if ((pids[i] = fork()) == 0)
			hold_one(fds[1], each);
	for (int i = 0; i < n; i++) {
		if (read(fds[0], &r, sizeof(r)) != sizeof(r))
			return 1;
		ok += r == 0;
	}
	printf("holders=%d\nholders_ok=%d\n", n, ok);
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	context();
	printf("probe_before=%d\n", alloc(&p, (size_t)each << 20));
	kill(pids[0], SIGKILL);
	waitpid(pids[0], NULL, 0);
	printf("probe_after=%d\n", alloc(&p, (size_t)each << 20));
	fflush(stdout);
	pause();
	return 0;
}

static int mode_spin(double seconds)
{
	CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, void *, void **, void **) = proc("cuLaunchKernel");
	CUresult (*sync)(void) = proc("cuCtxSynchronize");
	context();
	printf("spinning=1\n");
	fflush(stdout);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long n = 0;
	do {
		if (launch((void *)1, 432, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) != 0)
			return 1;
		n++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	sync();
	printf("launches=%lu\n", n);
	return 0;
}

typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef struct { unsigned int pid; unsigned long long used; unsigned gi, ci; } nvml_proc;

static int mode_nvml(void)
{
	int (*init)(void) = sym(nvml, "nvmlInit_v2");
	int (*handle)(unsigned, void **) = sym(nvml, "nvmlDeviceGetHandleByIndex_v2");
	int (*mem)(void *, nvml_memory *) = sym(nvml, "nvmlDeviceGetMemoryInfo");
	int (*procs)(void *, unsigned *, nvml_proc *) = sym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	void *dev;
	nvml_memory m;
	nvml_proc list[32];
	unsigned n = 32;
	CUdeviceptr p;
	context();
	if (alloc(&p, 256u << 20) != 0 || init() != 0 || handle(0, &dev) != 0 || mem(dev, &m) != 0 ||
	    procs(dev, &n, list) != 0)
		return 1;
	printf("total=%llu\nused=%llu\nself=%d\nprocesses=%u\n", m.total, m.used, getpid(), n);
	for (unsigned i = 0; i < n; i++)
		printf("process=%u:%llu\n", list[i].pid, list[i].used);
	fflush(stdout);
	pause();
	return 0;
}

/* What the container reaches: CUDA's and NVML's device lists. */
static int mode_devices(int once)
{
	CUresult (*init)(unsigned) = proc("cuInit");
	CUresult (*count)(int *) = proc("cuDeviceGetCount");
	CUresult (*get)(CUdevice *, int) = proc("cuDeviceGet");
	CUresult (*total)(size_t *, CUdevice) = proc("cuDeviceTotalMem");
	int (*ninit)(void) = sym(nvml, "nvmlInit_v2");
	int (*ncount)(unsigned *) = sym(nvml, "nvmlDeviceGetCount_v2");
	int n = 0;
	unsigned nn = 0;
	CUresult r = init(0);
	if (r == 0)
		r = count(&n);
	printf("cuda_init=%d\ncuda_devices=%d\n", r, n);
	for (int i = 0; i < n; i++) {
		CUdevice d;
		size_t bytes = 0;
		if (get(&d, i) == 0 && total(&bytes, d) == 0)
			printf("cuda_device_%d_mib=%zu\n", i, bytes >> 20);
	}
	int nr = ninit();
	if (nr == 0)
		nr = ncount(&nn);
	printf("nvml_init=%d\nnvml_devices=%u\n", nr, nn);
	fflush(stdout);
	if (!once)
		pause();
	return 0;
}

/* SIGTERM ends it at once: as a container's pid 1 it would otherwise be
 * ignored (no handler), and every pod deletion would wait out the
 * kubelet's grace period before SIGKILL. */
static void terminate(int sig)
{
	(void)sig;
	_exit(0);
}

int main(int argc, char **argv)
{
	signal(SIGTERM, terminate);
	setvbuf(stdout, NULL, _IOLBF, 0);
	cuda = dlopen("libcuda.so.1", RTLD_NOW);
	nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (cuda == NULL || nvml == NULL) {
		printf("error=%s\n", dlerror());
		return 3;
	}
	gpa = sym(cuda, "cuGetProcAddress_v2");
	if (argc == 3 && strcmp(argv[1], "fill") == 0)
		return mode_fill((unsigned)atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "procs") == 0)
		return mode_procs(atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 3 && strcmp(argv[1], "spin") == 0)
		return mode_spin(atof(argv[2]));
	if (argc == 3 && strcmp(argv[1], "overcommit") == 0)
		return mode_overcommit((unsigned)atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "nvml") == 0)
		return mode_nvml();
	if (argc == 2 && strcmp(argv[1], "devices") == 0)
		return mode_devices(0);
	if (argc == 3 && strcmp(argv[1], "devices") == 0 && strcmp(argv[2], "once") == 0)
		return mode_devices(1);
	fprintf(stderr, "usage: gpuworkload fill MiB | procs N MiB | spin S | nvml | devices [once] | overcommit MiB\n");
	return 2;
}
