/*
 * t_sm.c - SM limiter against the stub's simulated device time.
 *
 * Utilisation is measured from the busy time the stub records for this
 * process's kernels, over a window that starts after the controller settles,
 * so the result does not depend on how fast this machine runs the loop.
 *
 * The utilisation verdicts are judged in run.sh's normal mode only, at full
 * length, with the machine to itself. Under ASan+UBSan and ThreadSanitizer
 * (VGPU_TEST_TIMING=0, t_timing) the cases run the same code paths for a
 * shorter while (the limiter samples every 100 ms and refills every 10 ms:
 * 700 ms of load is seven samples) and look for memory errors, undefined
 * behaviour and races between the watcher's refill and the launch gate;
 * the utilisation there measures the sanitizer (an ASan run on a loaded
 * machine got 75.7 % of a 90 % share), so it is not asserted.
 */
#include "test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Set by the measuring thread, read by the launcher: atomic (TSan found the plain int). */
static int stop;

/* Launches grids of 4 waves through every launch family in turn. */
static void *launcher(void *arg)
{
	(void)arg;
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		CU(cuGetProcAddress_v2);
	CUresult (*launch_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				unsigned, unsigned, CUstream, void **, void **) = NULL;
	gpa("cuLaunchKernel", (void **)&launch_ptsz, 12000,
	    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
	__typeof__(&cuLaunchKernel) lk = CU(cuLaunchKernel);
	__typeof__(&cuLaunchKernelEx) lkx = CU(cuLaunchKernelEx);
	__typeof__(&cuLaunchCooperativeKernel) lck = CU(cuLaunchCooperativeKernel);
	int sm = 0;
	CU(cuDeviceGetAttribute)(&sm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
	unsigned grid = 4u * (unsigned)sm;
	CUlaunchConfig cfg = {.gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
			      .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1};
	CU(cuCtxSetCurrent)(*(CUcontext *)arg);
	for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
		CUresult r;
		switch (i % 4) {
		case 0: r = lk((CUfunction)1, grid, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL); break;
		case 1: r = launch_ptsz((CUfunction)1, grid, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL); break;
		case 2: r = lkx(&cfg, (CUfunction)1, NULL, NULL); break;
		default: r = lck((CUfunction)1, 2, 2 * (unsigned)sm, 1, 128, 1, 1, 0, NULL, NULL); break;
		}
		if (r != CUDA_SUCCESS) {
			CHECK_EQ(r, CUDA_SUCCESS);
			break;
		}
	}
	return NULL;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Starts the launcher on ctx, which must outlive it. */
static pthread_t start_launcher(CUcontext *ctx)
{
	pthread_t th;
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	pthread_create(&th, NULL, launcher, ctx);
	return th;
}

static void stop_launcher(pthread_t th)
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
}

/* The utilisation (%) this process's kernels get on device 0 over the next ms. */
static double util_over(unsigned ms)
{
	uint64_t (*busy)(int, int) = STUB(vgpuStubBusyNs);
	uint64_t (*now)(void) = STUB(vgpuStubNowNs);
	/* The stub knows this process by its host pid, as the driver does. */
	int pid = STUB(vgpuStubHostPid)();
	uint64_t b0 = busy(0, pid), t0 = now();
	sleep_ms(ms);
	uint64_t b1 = busy(0, pid), t1 = now();
	return 100.0 * (double)(b1 - b0) / (double)(t1 - t0);
}

/*
 * Runs the launcher; returns the utilisation (%) between settle_ms and
 * total_ms, or between 200 and untimed_ms without timing verdicts.
 */
static double run_load(unsigned settle_ms, unsigned total_ms, unsigned untimed_ms,
		       void (*after_init)(void))
{
	static CUcontext ctx;
	if (!t_timing()) {
		settle_ms = 200;
		total_ms = untimed_ms;
	}
	ctx = t_ctx(0);
	if (after_init)
		after_init();
	pthread_t th = start_launcher(&ctx);
	sleep_ms(settle_ms);
	double util = util_over(total_ms - settle_ms);
	stop_launcher(th);
	fprintf(stderr, "achieved SM utilisation %.1f%%\n", util);
	return util;
}

/* CUDA_DEVICE_SM_LIMIT=30: held within 30 +/- 10 points (16-SM or 132-SM stub). */
static int sm_limit_30(void)
{
	double u = run_load(1500, 4500, 900, NULL);
	CHECK(!t_timing() || (u >= 20.0 && u <= 40.0), "utilisation %.1f%% outside 30 +/- 10", u);
	return 0;
}

/*
 * CUDA_DEVICE_SM_LIMIT=L: held within L +/- 5 points. Run in a new PID
 * namespace (flag pidns in run.sh) with the stub reporting host pids, this is
 * the container case: the process knows only its namespaced pid.
 */
static int sm_share_run(unsigned untimed_ms)
{
	const char *v = getenv("CUDA_DEVICE_SM_LIMIT");
	double want = v != NULL ? atof(v) : 0;
	double u = run_load(1500, 4500, untimed_ms, NULL);
	CHECK(!t_timing() || (u >= want - 5.0 && u <= want + 5.0), "utilisation %.1f%% outside %.0f +/- 5",
	      u, want);
	return 0;
}

static int sm_share(void) { return sm_share_run(900); }

/*
 * Child of sm_fallback: the share through a fallback, with the warning that
 * names it expected exactly once on stderr (checked by the parent).
 */
static int sm_unlimited(void);

static int child_sm_fallback(void)
{
	const char *v = getenv("SM_FALLBACK_UNLIMITED");
	/*
	 * Unattributed utilisation switches to the device-wide figure after a
	 * second of it (BLIND_SAMPLES in limiter.c): a shorter run would never
	 * say so.
	 */
	return v != NULL && strcmp(v, "1") == 0 ? sm_unlimited() : sm_share_run(2500);
}

/*
 * SM_FALLBACK_EXPECT names the warning: per-process utilisation NOT_SUPPORTED
 * (MIG) or unattributable (host pids unknown in a PID namespace) both end in
 * device-wide utilisation, and the share still holds (one process: the
 * device's utilisation is the container's).
 */
static int sm_fallback(void)
{
	/* run.sh separates settings by spaces: the words of the message come with underscores. */
	const char *env = getenv("SM_FALLBACK_EXPECT");
	char want_buf[128], *want = NULL;
	if (env != NULL) {
		snprintf(want_buf, sizeof(want_buf), "%s", env);
		for (char *c = want_buf; *c; c++)
			if (*c == '_')
				*c = ' ';
		want = want_buf;
	}
	int rc;
	const char *err = t_child_stderr("child_sm_fallback", NULL, &rc);
	CHECK_EQ(rc, 0);
	fputs(err, stderr);
	CHECK(want == NULL || t_count(err, want) == 1, "want \"%s\" once on stderr", want);
	return 0;
}

/* No limit, policy disable, or the exporter's switch: the device runs flat out. */
static int sm_unlimited(void)
{
	double u = run_load(300, 1300, 900, NULL);
	CHECK(!t_timing() || u >= 85.0, "utilisation %.1f%%: should not be throttled", u);
	return 0;
}

/* Sets the exporter's switch of device 0, as the agent does. */
static void set_switch(uint32_t v)
{
	struct vgpu_region *r = t_region();
	if (r != NULL)
		__atomic_store_n(&r->hdr.util_switch[0], v, __ATOMIC_RELAXED);
}

static void switch_free(void) { set_switch(VGPU_UTIL_SWITCH_FREE); }

static int sm_switch_free(void)
{
	double u = run_load(300, 1300, 900, switch_free);
	CHECK(!t_timing() || u >= 85.0, "utilisation %.1f%%: the switch should turn limiting off", u);
	return 0;
}

/*
 * The exporter frees the device (the process is alone on its card) and
 * later enforces the limit again (a neighbour arrived). The process ran
 * limited first, so the limiter has learnt its rate; back under the limit
 * it must get at least half its share (15-40 %) at once, over the first
 * 300 ms (three samples), not starve while relearning a rate that the free
 * run drove down (it got 3.8 % when the rate was adapted while free).
 */
static int sm_switch_back(void)
{
	static CUcontext ctx;
	/* Without timing verdicts: limited, freed and limited again, shorter. */
	unsigned scale = t_timing() ? 5 : 1;
	ctx = t_ctx(0);
	pthread_t th = start_launcher(&ctx);
	sleep_ms(300 * scale);
	set_switch(VGPU_UTIL_SWITCH_FREE);
	sleep_ms(100 * scale);
	double free_u = util_over(200 * scale);
	set_switch(VGPU_UTIL_SWITCH_LIMIT);
	double u = util_over(300);
	stop_launcher(th);
	fprintf(stderr, "sm_switch: free %.1f%%, then limited %.1f%% in the first 300 ms\n", free_u, u);
	CHECK(!t_timing() || free_u >= 85.0, "utilisation %.1f%% while free: should not be throttled", free_u);
	CHECK(!t_timing() || (u >= 15.0 && u <= 40.0),
	      "utilisation %.1f%% in the first 300 ms after the switch went back: want 15-40 (limit 30)", u);
	return 0;
}

/* GPU_CORE_UTILIZATION_POLICY=force ignores the exporter's switch. */
static int sm_policy_force(void)
{
	double u = run_load(1500, 3500, 900, switch_free);
	CHECK(!t_timing() || (u >= 20.0 && u <= 40.0), "utilisation %.1f%%: force must keep limiting", u);
	return 0;
}

const struct t_case t_sm_cases[] = {
	{"sm_limit_30", sm_limit_30},
	{"sm_share", sm_share},
	{"sm_fallback", sm_fallback},
	{"child_sm_fallback", child_sm_fallback},
	{"sm_unlimited", sm_unlimited},
	{"sm_switch_free", sm_switch_free},
	{"sm_switch_back", sm_switch_back},
	{"sm_policy_force", sm_policy_force},
	{NULL, NULL},
};
