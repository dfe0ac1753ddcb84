/*
 * limiter.c - SM share: a token bucket per device in front of kernel launches.
 *
 * Cost model: a launch of B blocks on a device with S SMs costs B/S "waves"
 * (fixed point, VGPU_WAVE units per wave). Normalising by the SM count is what
 * makes one limiter setting behave the same on a 16-SM and a 132-SM GPU; a
 * fixed per-launch step (the known upstream bug) barely throttles large GPUs.
 *
 * Control loop (run by the watcher thread):
 *  - every tick (10 ms) the bucket is refilled at `rate` units per second,
 *    capped at 20 ms worth so an idle period cannot bank a burst;
 *  - every sample (100 ms) the container's SM utilisation U is read from
 *    nvmlDeviceGetProcessUtilization (summed over the container's host pids,
 *    hostpid.c) and the rate is scaled by sqrt(L/U). The square root halves
 *    the loop gain, which keeps the loop stable when NVML samples lag by a
 *    period;
 *  - the rate only grows while launches actually waited (anti-windup), so an
 *    application that does not use its share cannot build up a huge rate;
 *  - while the exporter's switch frees the device the rate is left as it
 *    is, so the limit comes back at the rate learnt under it.
 *
 * Where that measurement is not available it never runs open loop in
 * silence. Per-process utilisation NOT_SUPPORTED (MIG, old GPUs), or the
 * device busy while NVML attributes none of it to the container for a
 * second (host pids unknown), switches the device to the device-wide
 * utilisation (nvmlDeviceGetUtilizationRates): it counts the neighbours'
 * work as the container's, so the share is never exceeded and is undercut
 * only while others are busy. If NVML has no utilisation at all the limit
 * is not enforced. Each switch is said once on stderr and published in the
 * region (sm_mode) for the exporter.
 */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include <time.h>

#include "hooks.h"

#define VGPU_WAVE 1024
#define TICK_BURST_NS (20 * 1000 * 1000ull)
#define SAMPLE_NS (100 * 1000 * 1000ull)
#define RATE_MIN ((double)VGPU_WAVE)
#define RATE_MAX ((double)VGPU_WAVE * 1e9)
#define MAX_SAMPLES 256
#define MAX_PIDS 64

struct lim {
	int64_t tokens;         /* atomic: units available, may go negative (debt) */
	int starved;            /* atomic: a launch waited since the last sample */
	int sm_count;           /* atomic: 0 until queried */
	uint32_t launched;      /* atomic: launches since the last sample */
	uint32_t limit;         /* percent, 0 = no limit; immutable after setup */
	uint32_t mode;          /* VGPU_SM_MODE_*; watcher thread only */
	uint32_t blind;         /* samples in a row: busy device, nothing attributed */
	double rate;            /* units per second; watcher thread only */
	unsigned long long last_seen_us;
};

int vgpu_limiter_enabled;
int vgpu_watcher_running;
static struct lim lims[VGPU_MAX_DEVICES];
static uint64_t last_tick_ns, last_sample_ns;

static double initial_rate(uint32_t limit)
{
	/* Assume 1 ms per wave; the loop corrects this within a few samples. */
	return (double)limit / 100.0 * VGPU_WAVE * 1000.0;
}

void vgpu_limiter_setup(void)
{
	if (!vgpu_cfg.any_sm_limit)
		return;
	if (vgpu_cfg.policy == VGPU_POLICY_DISABLE) {
		VGPU_LOG(VGPU_LOG_INFO, "SM limit ignored: GPU_CORE_UTILIZATION_POLICY=disable");
		return;
	}
	int first = -1;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		if (vgpu_cfg.sm_limit[d] != 0 && first < 0)
			first = d;
	if (!vgpu_nvml_loaded() || vgpu_nvml_device(first) == NULL ||
	    (REAL(nvmlDeviceGetProcessUtilization) == NULL &&
	     REAL(nvmlDeviceGetUtilizationRates) == NULL)) {
		VGPU_LOG(VGPU_LOG_WARN,
			 "SM limit not enforced: NVML reports no utilisation (no NVML, or neither "
			 "per-process nor device utilisation)");
		return;
	}
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		lims[d].limit = vgpu_cfg.sm_limit[d];
		lims[d].mode = lims[d].limit == 0 ? VGPU_SM_MODE_NONE
			       : REAL(nvmlDeviceGetProcessUtilization) != NULL ? VGPU_SM_MODE_PROCESS
										: VGPU_SM_MODE_DEVICE;
		lims[d].rate = initial_rate(lims[d].limit);
		lims[d].tokens = 2 * VGPU_WAVE;
	}
	__atomic_store_n(&vgpu_limiter_enabled, 1, __ATOMIC_RELEASE);
}

void vgpu_limiter_after_fork(void)
{
	__atomic_store_n(&vgpu_watcher_running, 0, __ATOMIC_RELAXED);
	last_tick_ns = last_sample_ns = 0;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		lims[d].tokens = 2 * VGPU_WAVE;
		lims[d].last_seen_us = 0;
	}
}

static bool switched_off(int idx)
{
	struct vgpu_region *r = vgpu_region();
	return vgpu_cfg.policy == VGPU_POLICY_DEFAULT && r != NULL &&
	       __atomic_load_n(&r->hdr.util_switch[idx], __ATOMIC_RELAXED) == VGPU_UTIL_SWITCH_FREE;
}

static int sm_count(struct lim *l, CUdevice dev)
{
	int n = __atomic_load_n(&l->sm_count, __ATOMIC_RELAXED);
	if (n > 0)
		return n;
	if (REAL(cuDeviceGetAttribute) == NULL ||
	    REAL(cuDeviceGetAttribute)(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) !=
		    CUDA_SUCCESS ||
	    n <= 0)
		n = 1;
	__atomic_store_n(&l->sm_count, n, __ATOMIC_RELAXED);
	return n;
}

/* blocks == 0: cost unknown (graph launch), charged as one full wave. */
void vgpu_limiter_gate(CUdevice dev, int idx, uint64_t blocks)
{
	struct lim *l = &lims[idx];
	if (l->limit == 0 || __atomic_load_n(&l->mode, __ATOMIC_RELAXED) == VGPU_SM_MODE_OFF ||
	    switched_off(idx))
		return;
	__atomic_fetch_add(&l->launched, 1, __ATOMIC_RELAXED);
	vgpu_register();
	int64_t cost = VGPU_WAVE;
	if (blocks != 0) {
		uint64_t sms = (uint64_t)sm_count(l, dev);
		uint64_t c = blocks > (UINT64_C(1) << 40) ? (UINT64_C(1) << 50) : blocks * VGPU_WAVE / sms;
		cost = c == 0 ? 1 : (int64_t)c;
	}
	while (__atomic_load_n(&l->tokens, __ATOMIC_ACQUIRE) <= 0) {
		/* Without a watcher nothing refills the bucket: never block forever. */
		if (!__atomic_load_n(&vgpu_watcher_running, __ATOMIC_RELAXED))
			return;
		__atomic_store_n(&l->starved, 1, __ATOMIC_RELAXED);
		struct timespec wait = {0, 500 * 1000};
		nanosleep(&wait, NULL);
	}
	__atomic_fetch_sub(&l->tokens, cost, __ATOMIC_ACQ_REL);
}

static void refill(struct lim *l, uint64_t dt_ns)
{
	int64_t add = (int64_t)(l->rate * (double)dt_ns / 1e9);
	int64_t cap = (int64_t)(l->rate * (double)TICK_BURST_NS / 1e9);
	if (cap < 2 * VGPU_WAVE)
		cap = 2 * VGPU_WAVE;
	int64_t cur = __atomic_load_n(&l->tokens, __ATOMIC_RELAXED);
	int64_t next;
	do {
		next = cur + add > cap ? (cur > cap ? cur : cap) : cur + add;
	} while (!__atomic_compare_exchange_n(&l->tokens, &cur, next, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
}

/* Device-wide utilisation (percent), -1 if NVML cannot say, -2 if it never will. */
static int measure_device(nvmlDevice_t dev)
{
	nvmlUtilization_t u;
	if (REAL(nvmlDeviceGetUtilizationRates) == NULL)
		return -2;
	nvmlReturn_t rc = REAL(nvmlDeviceGetUtilizationRates)(dev, &u);
	if (rc == NVML_ERROR_NOT_SUPPORTED)
		return -2;
	return rc == NVML_SUCCESS ? (int)(u.gpu > 100 ? 100 : u.gpu) : -1;
}

/*
 * Container utilisation (percent) from one NVML per-process query: -1 on
 * error, -2 when the device does not support it. *any says whether the
 * device reported samples for anyone at all.
 */
static int measure_procs(nvmlDevice_t dev, struct lim *l, unsigned int *mine, bool *any)
{
	static nvmlProcessUtilizationSample_t buf[MAX_SAMPLES];
	unsigned int pids[MAX_PIDS], sum[MAX_PIDS] = {0}, cnt[MAX_PIDS] = {0};
	unsigned int n = MAX_SAMPLES;
	nvmlReturn_t rc = REAL(nvmlDeviceGetProcessUtilization)(dev, buf, &n, l->last_seen_us);
	*any = false;
	if (rc == NVML_ERROR_NOT_FOUND)
		n = 0;  /* no new samples: nothing ran */
	else if (rc == NVML_ERROR_NOT_SUPPORTED)
		return -2;
	else if (rc != NVML_SUCCESS)
		return -1;
	unsigned int self_pid;
	int np = vgpu_region_pids(pids, MAX_PIDS, &self_pid);
	for (unsigned int i = 0; i < n && i < MAX_SAMPLES; i++) {
		if (buf[i].timeStamp > l->last_seen_us)
			l->last_seen_us = buf[i].timeStamp;
		*any |= buf[i].smUtil > 0;
		for (int p = 0; p < np; p++)
			if (pids[p] == buf[i].pid) {
				sum[p] += buf[i].smUtil;
				cnt[p]++;
				break;
			}
	}
	unsigned int total = 0;
	*mine = 0;
	/* Several samples of one pid cover consecutive periods: average them. */
	for (int p = 0; p < np; p++) {
		if (cnt[p] == 0)
			continue;
		total += sum[p] / cnt[p];
		if (pids[p] == self_pid)
			*mine = sum[p] / cnt[p];
	}
	return (int)total;
}

static void switch_mode(int d, struct lim *l, uint32_t mode, const char *why)
{
	static const char *const names[] = {"off", "enforced from per-process utilisation",
					    "enforced from device-wide utilisation", "NOT enforced"};
	if (l->mode == mode)
		return;
	__atomic_store_n(&l->mode, mode, __ATOMIC_RELAXED);
	VGPU_LOG(mode == VGPU_SM_MODE_PROCESS ? VGPU_LOG_INFO : VGPU_LOG_WARN,
		 "device %d: SM limit %u%% %s: %s", d, l->limit, names[mode], why);
}

/* Samples in a row the device may be busy with nothing attributed to us. */
#define BLIND_SAMPLES 10

/*
 * Container utilisation of device d for this sample, in whatever mode the
 * device is in, switching modes as described at the top. -1: no figure now.
 */
static int measure(int d, struct lim *l, unsigned int *mine)
{
	nvmlDevice_t dev = vgpu_nvml_device(d);
	if (dev == NULL)
		return -1;
	uint32_t launched = __atomic_exchange_n(&l->launched, 0, __ATOMIC_RELAXED);
	*mine = 0;
	if (l->mode == VGPU_SM_MODE_PROCESS) {
		bool any;
		int used = measure_procs(dev, l, mine, &any);
		if (used == -2) {
			switch_mode(d, l, VGPU_SM_MODE_DEVICE,
				    "NVML per-process utilisation is not supported on this device (MIG?)");
		} else {
			/* Our kernels ran, someone is busy, and none of it is ours: attribution is broken. */
			l->blind = used == 0 && any && launched != 0 ? l->blind + 1 : 0;
			if (l->blind < BLIND_SAMPLES)
				return used;
			switch_mode(d, l, VGPU_SM_MODE_DEVICE,
				    "NVML attributes none of the device's work to this container's "
				    "processes (their host pids are unknown)");
		}
	}
	if (l->mode == VGPU_SM_MODE_DEVICE) {
		int used = measure_device(dev);
		if (used != -2) {
			*mine = used < 0 ? 0 : (unsigned int)used;
			return used;
		}
		switch_mode(d, l, VGPU_SM_MODE_OFF,
			    "NVML reports no utilisation for this device (MIG instance?)");
	}
	return -1;
}

static void adapt(struct lim *l, int used)
{
	double limit = l->limit, u = used;
	bool starved = __atomic_exchange_n(&l->starved, 0, __ATOMIC_RELAXED);
	double f = 1.0;
	if (u > limit)
		f = fmax(sqrt(limit / u), 0.5);
	else if (starved)
		f = fmin(sqrt(limit / fmax(u, limit / 4.0)), 2.0);
	l->rate = fmin(fmax(l->rate * f, RATE_MIN), RATE_MAX);
}

void vgpu_limiter_tick(void)
{
	uint64_t now = vgpu_now_ns();
	uint64_t dt = last_tick_ns ? now - last_tick_ns : 0;
	bool sample = now - last_sample_ns >= SAMPLE_NS;

	last_tick_ns = now;
	if (sample)
		last_sample_ns = now;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		struct lim *l = &lims[d];
		if (l->limit == 0)
			continue;
		refill(l, dt);
		/* A device this process never launched on has nothing to measure. */
		if (!sample || __atomic_load_n(&l->sm_count, __ATOMIC_RELAXED) == 0)
			continue;
		unsigned int mine = 0;
		int used = measure(d, l, &mine);
		vgpu_region_set_sm_mode(d, l->mode);
		if (used < 0)
			continue;
		vgpu_region_set_util(d, mine, (uint32_t)used);
		/*
		 * While the switch frees the device the rate is not in use, and
		 * adapting it to unthrottled utilisation would drive it to the
		 * minimum: the limit would come back starving the process while
		 * the rate is relearnt. Keep the rate learnt under the limit.
		 */
		if (!switched_off(d))
			adapt(l, used);
		VGPU_LOG(VGPU_LOG_TRACE, "device %d: sm util %d%% (limit %u%%), rate %.0f", d, used,
			 l->limit, l->rate);
	}
}
