/*
 * check_sm.c - one measurement of sm_share: how many spin kernels per second
 * this process completes, with or without an SM limit (the parent compares
 * the two, see run_sm_checks in gpu_check.c), and the PID namespace wrapper
 * for sm_share_pidns.
 *
 * The kernel is PTX text, JIT-compiled by the driver (cuModuleLoadData,
 * "Module Management": "a NULL-terminated PTX ... hand-written"), so no
 * compiler is needed. Each block's one thread reads %globaltimer (PTX ISA,
 * "Special Registers": a 64-bit global nanosecond timer, PTX 3.1+, sm_30+)
 * until the u64 parameter's nanoseconds have passed. The driver JIT-compiles
 * it for the GPU at hand (spin_ptx below for the targets).
 *
 * A grid has 4 blocks per SM, the launch cost libvgpu's limiter charges is
 * blocks / SMs = 4 waves, on a real GPU the grid occupies the device for
 * about 200 us, on the stub for 4 x VGPU_STUB_WAVE_NS. Grids are launched back
 * to back, 1.5 s to let the limiter settle, then 3 s measured; each window
 * ends with cuCtxSynchronize so that every launch counted has completed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_check.h"

#define BLOCKS_PER_SM 4
#define SPIN_NS 200000
#define SETTLE_S 1.5
#define WINDOW_S 3.0

/* The same kernel for several targets: oldest first, the first the driver accepts is used. */
#define SPIN_PTX(version, target)                                              \
	".version " version "\n"                                               \
	".target " target "\n"                                                 \
	".address_size 64\n"                                                   \
	"\n"                                                                   \
	".visible .entry gpu_check_spin(\n"                                    \
	"\t.param .u64 gpu_check_spin_ns\n"                                    \
	")\n"                                                                  \
	"{\n"                                                                  \
	"\t.reg .pred %p<2>;\n"                                                \
	"\t.reg .b64 %rd<5>;\n"                                                \
	"\n"                                                                   \
	"\tld.param.u64 %rd1, [gpu_check_spin_ns];\n"                          \
	"\tmov.u64 %rd2, %globaltimer;\n"                                      \
	"SPIN:\n"                                                              \
	"\tmov.u64 %rd3, %globaltimer;\n"                                      \
	"\tsub.s64 %rd4, %rd3, %rd2;\n"                                        \
	"\tsetp.lt.u64 %p1, %rd4, %rd1;\n"                                     \
	"\t@%p1 bra SPIN;\n"                                                   \
	"\tret;\n"                                                             \
	"}\n"

/*
 * sm_50 (PTX 6.0, CUDA 9) runs on every GPU a current driver supports; a
 * driver that no longer JIT-compiles Maxwell-era PTX (CUDA 13 removed
 * Maxwell to Volta from the toolkit) gets sm_75 (PTX 6.3) or sm_90 (PTX 7.8).
 */
static const struct {
	const char *target;
	const char *ptx;
} spin_ptx[] = {
	{"sm_50", SPIN_PTX("6.0", "sm_50")},
	{"sm_75", SPIN_PTX("6.3", "sm_75")},
	{"sm_90", SPIN_PTX("7.8", "sm_90")},
};

struct spin {
	const struct gc_api *api;
	CUfunction fn;
	unsigned int grid;
	unsigned long long ns;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Launches grids back to back for `seconds`, then waits for them all. */
static CUresult window(struct spin *s, double seconds, unsigned long long *launches,
		       double *elapsed)
{
	void *params[] = {&s->ns};
	double t0 = now_s();
	CUresult r = CUDA_SUCCESS;
	*launches = 0;
	while (r == CUDA_SUCCESS && now_s() - t0 < seconds) {
		r = s->api->cuLaunchKernel(s->fn, s->grid, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
		if (r == CUDA_SUCCESS)
			(*launches)++;
	}
	if (r == CUDA_SUCCESS)
		r = s->api->cuCtxSynchronize();
	*elapsed = now_s() - t0;
	return r;
}

/* Loads the spin kernel for the oldest target the driver takes: its index, -1 if none. */
static int load_spin(const struct gc_api *api, gc_module *mod, CUfunction *fn, CUresult *r)
{
	for (size_t i = 0; i < sizeof(spin_ptx) / sizeof(spin_ptx[0]); i++) {
		*r = api->cuModuleLoadData(mod, spin_ptx[i].ptx);
		if (*r != CUDA_SUCCESS)
			continue;
		*r = api->cuModuleGetFunction(fn, *mod, "gpu_check_spin");
		if (*r == CUDA_SUCCESS)
			return (int)i;
		api->cuModuleUnload(*mod);
	}
	return -1;
}

/* Reports "RATE <kernels/s> <details>" for the parent to compare. */
int gc_check_sm_rate(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuDeviceGetAttribute", "cuModuleLoadData",
					   "cuModuleGetFunction", "cuModuleUnload",
					   "cuLaunchKernel", "cuCtxSynchronize", NULL};
	struct spin s = {.api = api, .ns = SPIN_NS};
	unsigned long long launches;
	double elapsed;
	gc_module mod = NULL;
	CUdevice dev;
	int sms = 0;
	(void)t;
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
	if (r != CUDA_SUCCESS || sms <= 0)
		return gc_verdict(GC_FAIL, "SM count: cuDeviceGetAttribute returned %s, %d",
				  gc_cuerr(api, r), sms);
	s.grid = BLOCKS_PER_SM * (unsigned int)sms;
	int ptx = load_spin(api, &mod, &s.fn, &r);
	if (ptx < 0)
		return gc_verdict(GC_FAIL, "the spin kernel's PTX (sm_50, sm_75, sm_90) does not "
				  "load: cuModuleLoadData/cuModuleGetFunction returned %s last",
				  gc_cuerr(api, r));
	if ((r = window(&s, SETTLE_S, &launches, &elapsed)) == CUDA_SUCCESS)
		r = window(&s, WINDOW_S, &launches, &elapsed);
	api->cuModuleUnload(mod);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "launching the spin kernel: %s", gc_cuerr(api, r));
	return gc_verdict(GC_RATE, "%.3f (%llu grids of %u x %d us blocks, %s PTX, in %.2f s, "
			  "pid %d)", (double)launches / elapsed, launches, s.grid, SPIN_NS / 1000,
			  spin_ptx[ptx].target, elapsed, (int)getpid());
}

/* pid 1 of the namespace: a fresh /proc, then the measurement itself. */
static void namespace_init(const char *exe, char **argv)
{
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
		gc_verdict(GC_SKIP, "cannot mount /proc in the new PID namespace: %s",
			   strerror(errno));
		_exit(0);
	}
	argv[1] = "--run";
	execv(exe, argv);
	gc_verdict(GC_FAIL, "cannot execute %s: %s", exe, strerror(errno));
	_exit(1);
}

/*
 * `gpu_check --pidns <check> ...`: runs the check as pid 1 of a new PID
 * namespace with its own /proc, as a container runtime starts a container.
 * / is made private first so that the new /proc does not propagate back.
 * Exits with the measuring process's status (its signal re-raised).
 */
int gc_pidns_main(int argc, char **argv)
{
	char exe[PATH_MAX];
	int status = 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (argc < 3 || n <= 0)
		return gc_verdict(GC_FAIL, "internal: bad --pidns invocation");
	exe[n] = '\0';
	if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0)
		return gc_verdict(GC_SKIP, "cannot create a PID namespace: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return gc_verdict(GC_SKIP, "cannot make / private in the new mount namespace: %s",
				  strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		return gc_verdict(GC_FAIL, "fork into the PID namespace: %s", strerror(errno));
	if (pid == 0)
		namespace_init(exe, argv);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
