/*
 * priority.c - task priority (CUDA_TASK_PRIORITY, HAMi's nvidia.com/priority:
 * 0 high, 1 low): a low-priority process yields the card's SMs while a
 * high-priority task on the same card is launching kernels.
 *
 * HAMi's way (HAMi-core src/multiprocess/multiprocess_utilization_watcher.c,
 * rate_limiter; HAMi cmd/vGPUmonitor/feedback.go, Observe/CheckBlocking): each
 * launch sets the region's recent_kernel to 2; the monitor, every 5 s,
 * decrements it, counts containers with a recent kernel per card and
 * priority, and sets recent_kernel to -1 in a lower-priority container while
 * a higher one is active there; a launch then sleeps 1 s at a time until the
 * monitor clears it. It only runs where an SM limit is set, reacts in 5-10 s,
 * and a blocked container stays blocked until the next monitor pass.
 *
 * Here, with a clock instead of a counter:
 *  - every launch of a high-priority process stamps
 *    hdr.prio_launch_ns[0][dev] (CLOCK_MONOTONIC_COARSE, at most once a
 *    millisecond per process, so the shared cache line is not hammered);
 *  - the node agent copies, for every card, the newest such stamp of the
 *    other containers on it into hdr.peer_high_ns[dev] (monitor/priority.go);
 *  - a low-priority launch waits, in 1 ms sleeps, while either stamp is less
 *    than VGPU_PRIO_WINDOW_NS old, then goes on at its normal share (the SM
 *    limiter still applies after this gate).
 * A stamp only ages: a high-priority process that exits or is killed stops
 * holding anyone back one window later, with nothing to clean up. The gate
 * holds no lock while it waits, so it cannot deadlock: if the high task waits
 * for the low one, it stops launching and the low one runs. A stamp from the
 * future (a damaged file) is ignored rather than obeyed.
 * GPU_CORE_UTILIZATION_POLICY=disable turns the waiting off (no SM control);
 * a high-priority process still stamps.
 */
#define _GNU_SOURCE
#include <time.h>

#include "hooks.h"

/* A high-priority task counts as active this long after its last launch. */
#define VGPU_PRIO_WINDOW_NS (200 * 1000 * 1000ull)
/* A process restamps at most this often. */
#define VGPU_PRIO_STAMP_NS (1000 * 1000ull)
/* How long a held launch sleeps before looking again. */
#define VGPU_PRIO_POLL_NS (1000 * 1000L)

/*
 * The clock of the stamps: CLOCK_MONOTONIC_COARSE, the kernel's tick clock
 * (1-4 ms resolution), which every process on the node reads alike and
 * the vDSO serves several times faster than CLOCK_MONOTONIC (make -C
 * libvgpu bench: the launch cases in a region); a 200 ms window needs no
 * finer clock. Every reader and writer of the stamps uses it.
 */
static inline uint64_t prio_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int vgpu_prio_enabled;

void vgpu_prio_setup(void)
{
	if (!vgpu_region_shared())
		return;     /* nobody to yield to, nobody to tell */
	__atomic_store_n(&vgpu_prio_enabled, 1, __ATOMIC_RELEASE);
	VGPU_LOG(VGPU_LOG_DEBUG, "task priority %d (%s)", vgpu_cfg.priority,
		 vgpu_cfg.priority == VGPU_PRIO_HIGH ? "high" : "low");
}

static void stamp(uint64_t *word, uint64_t now)
{
	uint64_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
	if (now > old && now - old >= VGPU_PRIO_STAMP_NS)
		__atomic_store_n(word, now, __ATOMIC_RELAXED);
}

/* Newest sign of a high-priority task on device idx, 0 if none. */
static uint64_t newest_high(const struct vgpu_region_header *h, int idx)
{
	uint64_t own = __atomic_load_n(&h->prio_launch_ns[VGPU_PRIO_HIGH][idx], __ATOMIC_RELAXED);
	uint64_t peer = __atomic_load_n(&h->peer_high_ns[idx], __ATOMIC_RELAXED);
	return own > peer ? own : peer;
}

/* Whether a stamp taken at `high` still holds a low-priority launch at `now`. */
static bool holds(uint64_t high, uint64_t now)
{
	return high != 0 && high <= now && now - high < VGPU_PRIO_WINDOW_NS;
}

void vgpu_prio_gate(int idx)
{
	struct vgpu_region *r = vgpu_region();
	if (r == NULL)
		return;
	struct vgpu_region_header *h = &r->hdr;
	int prio = vgpu_cfg.priority;
	uint64_t now = 0;
	if (prio != VGPU_PRIO_HIGH && vgpu_cfg.policy != VGPU_POLICY_DISABLE) {
		static int said;
		for (bool held = false;; held = true) {
			uint64_t high = newest_high(h, idx);
			if (high == 0)
				break;      /* no high-priority task ever launched here */
			/* Read the clock after the stamp: a fresh stamp is never "from the future". */
			now = prio_now_ns();
			if (!holds(high, now))
				break;
			if (!held && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
				VGPU_LOG(VGPU_LOG_INFO,
					 "device %d: low priority: kernel launches wait while a "
					 "high-priority task on the card is launching", idx);
			struct timespec pause = {0, VGPU_PRIO_POLL_NS};
			nanosleep(&pause, NULL);
		}
	}
	stamp(&h->prio_launch_ns[prio][idx], now != 0 ? now : prio_now_ns());
}
