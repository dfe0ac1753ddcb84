/*
 * region_usage.c - charges against the region's totals, the watcher's
 * sweep, and what each process publishes there for the others and for the
 * exporter: its host pid, SM utilisation and mode, host-backed memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "region_int.h"

/* Sets this process's usage on device idx to `now`, slot first. Region locked, still_mine. */
static void set_mine_locked(int idx, uint64_t now, bool charge)
{
	struct vgpu_region_header *h = &vgpu_rs.r->hdr;
	struct vgpu_proc_slot *s = &vgpu_rs.r->slots[vgpu_rs.slot];
	uint64_t old = vgpu_rs.mine[idx];
	rg_put_used(&s->mem_used[idx], &s->mem_used_check[idx], now);
#ifdef VGPU_TEST_HOOKS
	if (charge && (vgpu_cfg.test_die_in_lock != 0 || vgpu_cfg.test_stop_in_lock != 0)) {
		++vgpu_rs.charges;
		if (vgpu_rs.charges == vgpu_cfg.test_die_in_lock)
			kill(getpid(), SIGKILL);    /* test hook: die mid-update, holding the lock */
		if (vgpu_rs.charges == vgpu_cfg.test_stop_in_lock)
			kill(getpid(), SIGSTOP);    /* test hook: stop holding the lock, until SIGCONT */
	}
#else
	(void)charge;
#endif
	vgpu_rs.mine[idx] = now;
	/* Re-checked here: the file may have been damaged since still_mine(). */
	uint64_t total;
	if (!rg_get_used(&h->mem_used[idx], &h->mem_used_check[idx], &total)) {
		rg_rebuild_locked(vgpu_rs.r);
		return;
	}
	total = now >= old ? total + (now - old) : (total > old - now ? total - (old - now) : 0);
	rg_put_used(&h->mem_used[idx], &h->mem_used_check[idx], total);
}

static int charge_locked(int idx, uint64_t bytes, uint64_t limit)
{
	uint64_t deadline = 0;
	bool swept = false;
	for (;;) {
		if (rg_enter() != 0)
			return -1;  /* no usable region: refuse rather than guess */
		struct vgpu_region *r = vgpu_rs.r;
		bool waiting = vgpu_rs.shared &&
			       (__atomic_load_n(&r->hdr.flags, __ATOMIC_RELAXED) & VGPU_REGION_RECOVERING) &&
			       rg_rebuild_locked(r) != 0;
		uint64_t used = 0;
		if (!waiting && !rg_get_used(&r->hdr.mem_used[idx], &r->hdr.mem_used_check[idx], &used)) {
			/* Damaged since still_mine(): recount from the slots, then read again. */
			waiting = rg_rebuild_locked(r) != 0 ||
				  !rg_get_used(&r->hdr.mem_used[idx], &r->hdr.mem_used_check[idx], &used);
		}
		if (!waiting) {
			if (limit == 0 || (used <= limit && bytes <= limit - used)) {
				set_mine_locked(idx, vgpu_rs.mine[idx] + bytes, true);
				rg_leave();
				return 0;
			}
			/* Over the limit: dead processes may still be counted. */
			if (swept || !vgpu_rs.shared) {
				rg_leave();
				return -1;
			}
			swept = true;
			rg_rebuild_locked(r);
			rg_leave();
			continue;
		}
		rg_leave();
		/* Live processes have not re-registered since a rebuild: they will within a watcher period. */
		uint64_t now = vgpu_now_ns();
		if (deadline == 0) {
			deadline = now + RECOVERY_WAIT_NS;
		} else if (now > deadline) {
			VGPU_LOG(VGPU_LOG_WARN, "shared region still recovering after %llu s; refusing %llu bytes",
				 RECOVERY_WAIT_NS / 1000000000ull, (unsigned long long)bytes);
			return -1;
		}
		pthread_mutex_unlock(&vgpu_rs.mu);
		struct timespec pause = {0, 2 * 1000 * 1000};
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&vgpu_rs.mu);
	}
}

int vgpu_region_charge(int idx, uint64_t bytes, uint64_t limit)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&vgpu_rs.mu);
	int rc = charge_locked(idx, bytes, limit);
	pthread_mutex_unlock(&vgpu_rs.mu);
	return rc;
}

void vgpu_region_force(int idx, int64_t delta)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES || delta == 0)
		return;
	pthread_mutex_lock(&vgpu_rs.mu);
	uint64_t now = vgpu_rs.mine[idx];
	if (delta < 0)
		/* never give back more than this process holds */
		now -= (uint64_t)(-delta) < now ? (uint64_t)(-delta) : now;
	else
		now += (uint64_t)delta;
	if (rg_enter() == 0) {
		set_mine_locked(idx, now, false);
		rg_leave();
	} else {
		vgpu_rs.mine[idx] = now;  /* the region is unusable; the record stays right */
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
}

uint64_t vgpu_region_used(int idx)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&vgpu_rs.mu);
	uint64_t used = vgpu_rs.shared ? vgpu_rs.r->hdr.mem_used[idx] : vgpu_rs.mine[idx];
	pthread_mutex_unlock(&vgpu_rs.mu);
	return used;
}

/*
 * Called by the watcher thread every 100 ms: re-registers after a rebuild or
 * damage (rg_enter() does), finishes a recovery nobody is charging through, and
 * once a second reclaims the slots of dead processes so that the exporter
 * sees their usage go.
 */
void vgpu_region_watch(void)
{
	if (!vgpu_rs.shared)
		return;
	pthread_mutex_lock(&vgpu_rs.mu);
	if (vgpu_rs.slot >= 0 && rg_enter() == 0) {
		uint64_t now = vgpu_now_ns();
		if (now - vgpu_rs.last_sweep_ns >= SWEEP_NS ||
		    (__atomic_load_n(&vgpu_rs.r->hdr.flags, __ATOMIC_RELAXED) & VGPU_REGION_RECOVERING)) {
			rg_rebuild_locked(vgpu_rs.r);
			vgpu_rs.last_sweep_ns = now;
		}
		rg_leave();
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
}

/* Pids NVML may report for this container's live processes, and our own. */
int vgpu_region_pids(unsigned int *pids, int max, unsigned int *self)
{
	struct vgpu_rproc procs[64];
	int n = vgpu_region_procs(-1, procs, max < 64 ? max : 64);
	for (int i = 0; i < n; i++)
		pids[i] = (unsigned int)(procs[i].hostpid > 0 ? procs[i].hostpid : procs[i].pid);
	*self = 0;
	int slot = __atomic_load_n(&vgpu_rs.slot, __ATOMIC_ACQUIRE);
	if (vgpu_rs.r != NULL && slot >= 0)
		*self = (unsigned int)__atomic_load_n(&vgpu_rs.r->slots[slot].hostpid, __ATOMIC_RELAXED);
	return n;
}

int vgpu_region_procs(int idx, struct vgpu_rproc *out, int max)
{
	int n = 0;
	if (vgpu_rs.r == NULL)
		return 0;
	pthread_mutex_lock(&vgpu_rs.mu);
	uint32_t hwm = __atomic_load_n(&vgpu_rs.r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < hwm && i < VGPU_MAX_PROCS && n < max; i++) {
		const struct vgpu_proc_slot *s = &vgpu_rs.r->slots[i];
		uint64_t mem = UINT64_MAX;
		if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
			continue;
		if (idx >= 0 && idx < VGPU_MAX_DEVICES &&
		    !rg_get_used(&s->mem_used[idx], &s->mem_used_check[idx], &mem))
			mem = UINT64_MAX;
		out[n++] = (struct vgpu_rproc){__atomic_load_n(&s->hostpid, __ATOMIC_RELAXED),
					       __atomic_load_n(&s->pid, __ATOMIC_RELAXED), mem,
					       __atomic_load_n(&s->hostpid_source, __ATOMIC_RELAXED)};
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
	return n;
}

/* Publishes SM utilisation: this process's share and the container's. */
void vgpu_region_set_util(int idx, uint32_t mine, uint32_t total)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	pthread_mutex_lock(&vgpu_rs.mu);
	if (vgpu_rs.slot >= 0)
		__atomic_store_n(&vgpu_rs.r->slots[vgpu_rs.slot].sm_util[idx], mine, __ATOMIC_RELAXED);
	__atomic_store_n(&vgpu_rs.r->hdr.sm_util[idx], total, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&vgpu_rs.mu);
}

/* Records this process's host pid, learned after registration (hostpid.c). */
void vgpu_region_set_hostpid(int32_t pid, uint32_t source)
{
	pthread_mutex_lock(&vgpu_rs.mu);
	vgpu_rs.hostpid = pid;
	vgpu_rs.hostpid_source = source;
	if (vgpu_rs.r != NULL && vgpu_rs.slot >= 0) {
		struct vgpu_proc_slot *s = &vgpu_rs.r->slots[vgpu_rs.slot];
		__atomic_store_n(&s->hostpid_source, source, __ATOMIC_RELAXED);
		__atomic_store_n(&s->hostpid, pid, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
}

/* Publishes how the SM limit of device idx is enforced (VGPU_SM_MODE_*). */
void vgpu_region_set_sm_mode(int idx, uint32_t mode)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	__atomic_store_n(&vgpu_rs.r->hdr.sm_mode[idx], mode, __ATOMIC_RELAXED);
}

/*
 * Records that `delta` bytes of this process's usage on device idx are (no
 * longer) served from host memory, and republishes the container's total.
 */
void vgpu_region_host(int idx, int64_t delta)
{
	if (vgpu_rs.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	pthread_mutex_lock(&vgpu_rs.mu);
	uint64_t now = vgpu_rs.host[idx];
	vgpu_rs.host[idx] = delta < 0 && (uint64_t)-delta > now ? 0 : now + (uint64_t)delta;
	if (vgpu_rs.slot >= 0)
		__atomic_store_n(&vgpu_rs.r->slots[vgpu_rs.slot].host_mib[idx], rg_host_mib(vgpu_rs.host[idx]),
				 __ATOMIC_RELAXED);
	if (rg_enter() == 0) {
		uint32_t total = 0;
		uint32_t hwm = __atomic_load_n(&vgpu_rs.r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; i < hwm && i < VGPU_MAX_PROCS; i++)
			if (__atomic_load_n(&vgpu_rs.r->slots[i].status, __ATOMIC_ACQUIRE) == VGPU_SLOT_ACTIVE)
				total += __atomic_load_n(&vgpu_rs.r->slots[i].host_mib[idx], __ATOMIC_RELAXED);
		__atomic_store_n(&vgpu_rs.r->hdr.host_mib[idx], total, __ATOMIC_RELAXED);
		rg_leave();
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
}
