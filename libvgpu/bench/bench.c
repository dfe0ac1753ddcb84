/*
 * bench.c - libvgpu microbenchmark against the stub driver.
 *
 * Each case runs in fresh processes, five times without and five times
 * with LD_PRELOAD of libvgpu.so; the table reports the medians, the
 * difference and the ratio. Entry points are resolved the way runtimes do (dlopen + dlsym, or
 * cuGetProcAddress). Usage: bench <libvgpu.so> <stub dir>
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	void *p = h ? dlsym(h, name) : NULL;
	if (p == NULL) {
		fprintf(stderr, "bench: no %s\n", name);
		exit(1);
	}
	return p;
}
#define CU(name) ((__typeof__(&name))sym(#name))

static void ctx(void)
{
	CUcontext c;
	if (CU(cuInit)(0) || CU(cuDevicePrimaryCtxRetain)(&c, 0) || CU(cuCtxSetCurrent)(c)) {
		fprintf(stderr, "bench: no context\n");
		exit(1);
	}
}

/* Each case prints ns per operation on stdout. */
static double case_passthrough(void)
{
	__typeof__(&cuDriverGetVersion) f = CU(cuDriverGetVersion);
	int v;
	const long n = 20000000;
	double t = now_s();
	for (long i = 0; i < n; i++)
		f(&v);
	return (now_s() - t) * 1e9 / (double)n;
}

static double case_passthrough_gpa(void)
{
	__typeof__(&cuDriverGetVersion) f;
	CU(cuInit)(0);
	CU(cuGetProcAddress_v2)("cuDriverGetVersion", (void **)&f, 12000, 0, NULL);
	int v;
	const long n = 20000000;
	double t = now_s();
	for (long i = 0; i < n; i++)
		f(&v);
	return (now_s() - t) * 1e9 / (double)n;
}

static double case_alloc(void)
{
	ctx();
	__typeof__(&cuMemAlloc_v2) alloc = CU(cuMemAlloc_v2);
	__typeof__(&cuMemFree_v2) release = CU(cuMemFree_v2);
	CUdeviceptr p;
	const long n = 300000;
	double t = now_s();
	for (long i = 0; i < n; i++) {
		if (alloc(&p, 1 << 20) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) {
			fprintf(stderr, "bench: alloc failed\n");
			exit(1);
		}
	}
	return (now_s() - t) * 1e9 / (double)n;
}

static double case_async(void)
{
	ctx();
	__typeof__(&cuMemAllocAsync) alloc = CU(cuMemAllocAsync);
	__typeof__(&cuMemFreeAsync) release = CU(cuMemFreeAsync);
	CUdeviceptr p;
	const long n = 300000;
	double t = now_s();
	for (long i = 0; i < n; i++) {
		if (alloc(&p, 1 << 20, NULL) != CUDA_SUCCESS || release(p, NULL) != CUDA_SUCCESS) {
			fprintf(stderr, "bench: async alloc failed\n");
			exit(1);
		}
	}
	return (now_s() - t) * 1e9 / (double)n;
}

static double case_launch(void)
{
	ctx();
	__typeof__(&cuLaunchKernel) launch = CU(cuLaunchKernel);
	/* With a limit, let the controller open the bucket (no simulated work). */
	double warm = now_s();
	while (now_s() - warm < (getenv("CUDA_DEVICE_SM_LIMIT") ? 2.5 : 0.2))
		launch((CUfunction)1, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	const long n = 10000000;
	double t = now_s();
	for (long i = 0; i < n; i++)
		launch((CUfunction)1, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return (now_s() - t) * 1e9 / (double)n;
}

/* Holds a region slot until stdin closes (the 64-process case). */
static int hold(void)
{
	char c;
	ctx();
	return read(0, &c, 1) < 0;
}

static int init_one(void)
{
	ctx();
	return 0;
}

/* One process's first context (cuInit + primary context), in us: host-pid discovery happens here. */
static double case_first_ctx(void)
{
	double t = now_s();
	ctx();
	return (now_s() - t) * 1e6;
}

/* A child of first_alloc256: cuInit, context, first cuMemAlloc; its latency (us) on fd 3. */
static int first_alloc_one(void)
{
	double t = now_s();
	ctx();
	CUdeviceptr p;
	if (CU(cuMemAlloc_v2)(&p, 1 << 20) != CUDA_SUCCESS)
		return 1;
	double us = (now_s() - t) * 1e6;
	return write(3, &us, sizeof(us)) == sizeof(us) ? 0 : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/*
 * 256 processes start at once and each makes its first allocation in the
 * shared region; prints p50/p99/max of their latencies (us) on stderr and
 * returns the p99. Reported, never asserted.
 */
static double case_first_alloc256(const char *self)
{
	int fds[2], pids[256];
	double lat[256];
	if (pipe(fds) != 0)
		return -1;
	for (int i = 0; i < 256; i++)
		if ((pids[i] = fork()) == 0) {
			dup2(fds[1], 3);
			execl(self, self, "--first-alloc", (char *)NULL);
			_exit(127);
		}
	close(fds[1]);
	int n = 0;
	while (n < 256 && read(fds[0], &lat[n], sizeof(double)) == sizeof(double))
		n++;
	for (int i = 0; i < 256; i++)
		waitpid(pids[i], NULL, 0);
	if (n == 0)
		return -1;
	qsort(lat, (size_t)n, sizeof(double), cmp_double);
	fprintf(stderr, "    %d processes: first allocation p50 %.0f us, p99 %.0f us, max %.0f us\n", n,
		lat[n / 2], lat[n * 99 / 100], lat[n - 1]);
	return lat[n * 99 / 100];
}

static double case_init256(const char *self)
{
	int pids[256];
	double t = now_s();
	for (int i = 0; i < 256; i++)
		if ((pids[i] = fork()) == 0) {
			execl(self, self, "--init", (char *)NULL);
			_exit(127);
		}
	int bad = 0;
	for (int i = 0; i < 256; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	if (bad)
		fprintf(stderr, "bench: %d inits failed\n", bad);
	return (now_s() - t) * 1e3;     /* ms in total */
}

struct bcase {
	const char *name, *label, *env, *unit;
	int helpers;
	int wholecard;      /* 1: the whole-card set (BENCH_SET=wholecard, make bench-wholecard) */
};

static const struct bcase cases[] = {
	{"pass", "pass-through cuDriverGetVersion (dlsym)", "CUDA_DEVICE_MEMORY_LIMIT=8g", "ns", 0, 0},
	{"pass_gpa", "pass-through cuDriverGetVersion (cuGetProcAddress)", "CUDA_DEVICE_MEMORY_LIMIT=8g", "ns", 0, 0},
	{"alloc", "cuMemAlloc+cuMemFree, limit, 64 procs in region", "CUDA_DEVICE_MEMORY_LIMIT=8g REGION", "ns", 63, 0},
	{"launch", "cuLaunchKernel, no SM limit", "", "ns", 0, 0},
	{"launch_lim", "cuLaunchKernel, SM limit 50% (not throttling)", "CUDA_DEVICE_SM_LIMIT=50", "ns", 0, 0},
	/* As in a pod: the agent always gives a region, so the priority gate runs. */
	{"launch", "cuLaunchKernel in a region, low priority, no high neighbour", "REGION", "ns", 0, 0},
	{"launch", "cuLaunchKernel in a region, high priority (stamps launches)",
	 "REGION CUDA_TASK_PRIORITY=0", "ns", 0, 0},
	{"launch_lim", "cuLaunchKernel in a region, SM limit 50%, low priority",
	 "REGION CUDA_DEVICE_SM_LIMIT=50", "ns", 0, 0},
	{"init256", "256 concurrent process inits (total)", "CUDA_DEVICE_MEMORY_LIMIT=8g REGION", "ms", 0, 0},
	{"first_ctx", "first context (register, host-pid discovery)", "CUDA_DEVICE_MEMORY_LIMIT=8g REGION", "us", 0, 0},
	{"first_ctx", "first context, NVML lists no processes (no discovery)",
	 "CUDA_DEVICE_MEMORY_LIMIT=8g REGION VGPU_STUB_NVML_PROC_LIST=unsupported", "us", 0, 0},
	{"first_alloc256", "256 processes at once: first cuMemAlloc p99", "CUDA_DEVICE_MEMORY_LIMIT=8g REGION", "us", 0, 0},
	/*
	 * A container given whole cards (issue 34 item 3): "without" is libvgpu
	 * out of its way (CUDA_DISABLE_CONTROL=true: no preload), "with" is
	 * libvgpu counting as the agent sets it up today: a region and a limit
	 * equal to the card (the stub's 16 GiB), no SM limit.
	 */
	{"alloc", "whole card: cuMemAlloc+cuMemFree", "CUDA_DEVICE_MEMORY_LIMIT=16g REGION", "ns", 0, 1},
	{"async", "whole card: cuMemAllocAsync+cuMemFreeAsync", "CUDA_DEVICE_MEMORY_LIMIT=16g REGION", "ns", 0, 1},
	{"launch", "whole card: cuLaunchKernel", "CUDA_DEVICE_MEMORY_LIMIT=16g REGION", "ns", 0, 1},
	{"first_ctx", "whole card: first context", "CUDA_DEVICE_MEMORY_LIMIT=16g REGION", "us", 0, 1},
	{"pass", "whole card: pass-through cuDriverGetVersion", "CUDA_DEVICE_MEMORY_LIMIT=16g REGION", "ns", 0, 1},
};

static double run(const char *self, const struct bcase *c, const char *lib, const char *stub,
		  int preload, const char *dir)
{
	int out[2], hold_pipe[2];
	int helpers[64];
	char region[512], envbuf[512];
	if (pipe(out) || pipe(hold_pipe))
		exit(1);
	snprintf(region, sizeof(region), "%s/vgpu.cache", dir);
	unlink(region);
	int pid = fork();
	if (pid == 0) {
		clearenv();
		setenv("LD_LIBRARY_PATH", stub, 1);
		setenv("VGPU_STUB_WAVE_NS", "0", 1);
		setenv("VGPU_STUB_CTX_MEM", "0", 1);
		if (preload)
			setenv("LD_PRELOAD", lib, 1);
		snprintf(envbuf, sizeof(envbuf), "%s", c->env);
		for (char *save = NULL, *kv = strtok_r(envbuf, " ", &save); kv;
		     kv = strtok_r(NULL, " ", &save)) {
			if (strcmp(kv, "REGION") == 0)
				setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", region, 1);
			else
				putenv(strdup(kv));
		}
		for (int i = 0; i < c->helpers; i++)
			if ((helpers[i] = fork()) == 0) {
				dup2(hold_pipe[0], 0);
				close(hold_pipe[1]);
				execl(self, self, "--hold", (char *)NULL);
				_exit(127);
			}
		close(hold_pipe[0]);
		usleep(c->helpers ? 300000 : 0);    /* let helpers register */
		dup2(out[1], 1);
		execl(self, self, "--case", c->name, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(hold_pipe[0]);
	char buf[64] = {0};
	ssize_t n = read(out[0], buf, sizeof(buf) - 1);
	close(out[0]);
	int st;
	waitpid(pid, &st, 0);
	close(hold_pipe[1]);
	while (wait(NULL) > 0)
		;
	return n > 0 ? atof(buf) : -1;
}

/* The median of RUNS fresh runs, alternating with and without in the caller. */
#define RUNS 5
static double median_run(const char *self, const struct bcase *c, const char *lib, const char *stub,
			 int preload, const char *dir)
{
	double v[RUNS];
	for (int i = 0; i < RUNS; i++)
		v[i] = run(self, c, lib, stub, preload, dir);
	qsort(v, RUNS, sizeof(double), cmp_double);
	return v[RUNS / 2];
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--hold") == 0)
		return hold();
	if (argc == 2 && strcmp(argv[1], "--init") == 0)
		return init_one();
	if (argc == 2 && strcmp(argv[1], "--first-alloc") == 0)
		return first_alloc_one();
	if (argc == 3 && strcmp(argv[1], "--case") == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		self[n > 0 ? n : 0] = '\0';
		double v = 0;
		if (!strcmp(argv[2], "pass")) v = case_passthrough();
		else if (!strcmp(argv[2], "pass_gpa")) v = case_passthrough_gpa();
		else if (!strcmp(argv[2], "alloc")) v = case_alloc();
		else if (!strcmp(argv[2], "async")) v = case_async();
		else if (!strcmp(argv[2], "launch") || !strcmp(argv[2], "launch_lim")) v = case_launch();
		else if (!strcmp(argv[2], "init256")) v = case_init256(self);
		else if (!strcmp(argv[2], "first_ctx")) v = case_first_ctx();
		else if (!strcmp(argv[2], "first_alloc256")) v = case_first_alloc256(self);
		printf("%.3f\n", v);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s <libvgpu.so> <stub dir>\n", argv[0]);
		return 2;
	}
	char self[4096], dir[] = "/tmp/vgpu-bench-XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (mkdtemp(dir) == NULL)
		return 1;
	const char *set = getenv("BENCH_SET");
	int wholecard = set != NULL && strcmp(set, "wholecard") == 0;
	printf("%-52s %12s %12s %12s %8s\n", "case", "without", "with", "delta", "ratio");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bcase *c = &cases[i];
		if (c->wholecard != wholecard)
			continue;
		double base = median_run(self, c, argv[1], argv[2], 0, dir);
		double with = median_run(self, c, argv[1], argv[2], 1, dir);
		printf("%-52s %9.1f %2s %9.1f %2s %+9.1f %2s %7.2fx\n", c->label, base, c->unit, with,
		       c->unit, with - base, c->unit, base > 0 ? with / base : 0);
		fflush(stdout);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) != 0;
}
