/*
 * region_lock.c - the kernel's locks on the region file and the region lock.
 *
 * flock(2) serialises formatting and slot claims; each process holds an
 * open-file-description lock on its slot's first byte for its lifetime (the
 * kernel drops it when the process is gone, so it is the liveness of the
 * slot); the region lock is a futex word in the header naming its owner's
 * slot. Waits are bounded: a holder that is alive but does not run
 * (stopped, traced, frozen) is given up on after LIBVGPU_LOCK_TIMEOUT_MS.
 * See region.c for the protocol as a whole.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "region_int.h"

off_t rg_slot_byte(uint32_t i) { return (off_t)VGPU_HEADER_SIZE + (off_t)i * VGPU_SLOT_SIZE; }

/*
 * How long a lock may be held with no progress before waiters give up: a
 * holder that is alive but stopped (SIGSTOP, a debugger, a frozen cgroup)
 * must not block every other process of the container forever. Legitimate
 * holds last microseconds to milliseconds. LIBVGPU_LOCK_TIMEOUT_MS (env.c).
 */
static uint64_t stuck_ns(void) { return (uint64_t)vgpu_cfg.lock_timeout_ms * 1000000u; }

/* flock(LOCK_EX), given up with ETIMEDOUT after twice the stuck time. */
int rg_flock_ex(int fd)
{
	uint64_t deadline = 0;
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		uint64_t now = vgpu_now_ns();
		if (deadline == 0) {
			deadline = now + 2 * stuck_ns();
		} else if (now > deadline) {
			VGPU_LOG(VGPU_LOG_WARN, "shared region %s: another process has held its file lock "
				 "for %u ms without releasing it (stopped by SIGSTOP, a debugger or a frozen "
				 "cgroup?)", vgpu_cfg.region_path, 2 * vgpu_cfg.lock_timeout_ms);
			errno = ETIMEDOUT;
			return -1;
		}
		struct timespec pause = {0, 1000 * 1000};
		nanosleep(&pause, NULL);
	}
}

int rg_slot_lock(int cmd, short type, uint32_t i)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = rg_slot_byte(i), .l_len = 1};
	return fcntl(vgpu_rs.fd, cmd, &fl);
}

/* True unless the kernel says nobody else holds slot i's lock. */
static bool slot_alive(uint32_t i)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = rg_slot_byte(i), .l_len = 1};
	if (fcntl(vgpu_rs.fd, F_OFD_GETLK, &fl) != 0)
		return true;    /* cannot tell: never declare a process dead on a guess */
	return fl.l_type != F_UNLCK;
}

/*
 * Marks held[i] for every slot whose lock another open file description holds.
 * F_OFD_GETLK reports one conflicting lock of a range, not necessarily the
 * lowest, so each lock found splits its range in two still to be searched:
 * one call per lock plus one per empty gap. -1 if the kernel cannot tell.
 */
int rg_scan_held(bool held[VGPU_MAX_PROCS])
{
	const off_t base = rg_slot_byte(0);
	off_t todo[2 * VGPU_MAX_PROCS + 2][2];
	int n = 0;
	memset(held, 0, VGPU_MAX_PROCS * sizeof(held[0]));
	todo[n][0] = base, todo[n][1] = rg_slot_byte(VGPU_MAX_PROCS), n++;
	while (n > 0) {
		n--;
		off_t lo = todo[n][0], hi = todo[n][1];
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = lo, .l_len = hi - lo};
		if (fcntl(vgpu_rs.fd, F_OFD_GETLK, &fl) != 0)
			return -1;
		if (fl.l_type == F_UNLCK)
			continue;
		off_t a = fl.l_start > lo ? fl.l_start : lo;
		off_t b = fl.l_len == 0 || fl.l_start + fl.l_len > hi ? hi : fl.l_start + fl.l_len;
		/* Every slot whose first byte the lock covers. */
		for (off_t i = (a - base + VGPU_SLOT_SIZE - 1) / VGPU_SLOT_SIZE;
		     i < VGPU_MAX_PROCS && rg_slot_byte((uint32_t)i) < b; i++)
			held[i] = true;
		if (n + 2 > (int)(sizeof(todo) / sizeof(todo[0])))
			return -1;  /* more locks than slots: not ours */
		if (lo < a)
			todo[n][0] = lo, todo[n][1] = a, n++;
		if (b < hi)
			todo[n][0] = b, todo[n][1] = hi, n++;
	}
	return 0;
}

bool rg_other_users(void)
{
	bool held[VGPU_MAX_PROCS];
	if (rg_scan_held(held) != 0)
		return true;
	for (int i = 0; i < VGPU_MAX_PROCS; i++)
		if (held[i] && i != vgpu_rs.slot)
			return true;
	return false;
}

/* ---- the region lock ---- */

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/* The process named by a lock word is gone (or the word is garbage). */
static bool owner_gone(uint32_t word)
{
	uint32_t owner = word & LOCK_OWNER_MASK;
	if (owner == 0 || owner > VGPU_MAX_PROCS || (word & ~(LOCK_WAITERS | LOCK_OWNER_MASK)) == 0)
		return true;
	/* Our slot: we hold vgpu_rs.mu, so this is a previous owner of the slot. */
	if ((int)owner - 1 == vgpu_rs.slot)
		return true;
	return !slot_alive(owner - 1);
}


/* Says, once per stuck holding, who holds the region lock and for how long. */
static void report_stuck(struct vgpu_region *r, uint32_t word)
{
	static uint32_t reported;
	if (__atomic_exchange_n(&reported, word, __ATOMIC_RELAXED) == word)
		return;
	uint32_t owner = word & LOCK_OWNER_MASK;
	int32_t pid = owner >= 1 && owner <= VGPU_MAX_PROCS
			      ? __atomic_load_n(&r->slots[owner - 1].pid, __ATOMIC_RELAXED) : 0;
	VGPU_LOG(VGPU_LOG_WARN, "shared region %s: pid %d has held the region lock for more than "
		 "%u ms and is alive (stopped by SIGSTOP, a debugger or a frozen cgroup?); giving up: "
		 "allocations are refused until it lets go, frees are recorded and settled later",
		 vgpu_cfg.region_path, pid, vgpu_cfg.lock_timeout_ms);
}

/*
 * Takes the region lock as slot vgpu_rs.slot. The word carries a fresh sequence
 * number per acquisition so that a waiter can never take over a lock that a
 * new owner of the same slot acquired meanwhile (the compare-and-swap would
 * see a different word). The same sequence number tells progress: a word
 * that stays the same for stuck_ns() while its owner lives is a holder that
 * does not run; the wait ends with LOCK_STUCK.
 */
int rg_region_lock(struct vgpu_region *r)
{
	uint32_t last = 0;
	uint64_t since = 0;
	uint32_t *w = &r->hdr.lock.word;
	vgpu_rs.seq = (vgpu_rs.seq + 1) & LOCK_SEQ_MASK;
	if (vgpu_rs.seq == 0)
		vgpu_rs.seq = 1;
	uint32_t me = vgpu_rs.seq << LOCK_SEQ_SHIFT | ((uint32_t)vgpu_rs.slot + 1), cur = 0;
	vgpu_rs.token = me;
	if (__atomic_compare_exchange_n(w, &cur, me, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return LOCKED;
	/* Contended: from now on the word says there may be waiters. */
	for (;;) {
		if (cur == 0) {
			if (__atomic_compare_exchange_n(w, &cur, me | LOCK_WAITERS, false, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return LOCKED;
			continue;
		}
		if (!(cur & LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(w, &cur, cur | LOCK_WAITERS, false, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		cur |= LOCK_WAITERS;
		struct timespec ts = {0, LOCK_POLL_NS};
		if (futex(w, FUTEX_WAIT, cur, &ts) != 0 && errno == ETIMEDOUT) {
			if (owner_gone(cur)) {
				uint32_t seen = cur;
				if (__atomic_compare_exchange_n(w, &seen, me | LOCK_WAITERS, false,
								__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
					return LOCKED_FROM_DEAD;
			} else if ((cur & ~LOCK_WAITERS) != last) {
				last = cur & ~LOCK_WAITERS;
				since = vgpu_now_ns();
			} else if (vgpu_now_ns() - since > stuck_ns()) {
				report_stuck(r, last);
				return LOCK_STUCK;
			}
		}
		cur = __atomic_load_n(w, __ATOMIC_RELAXED);
	}
}

void rg_region_unlock(struct vgpu_region *r)
{
	uint32_t *w = &r->hdr.lock.word;
	uint32_t cur = __atomic_load_n(w, __ATOMIC_RELAXED);
	/* If the word is no longer ours (the file was damaged), leave it to its waiters. */
	while ((cur & ~LOCK_WAITERS) == vgpu_rs.token) {
		if (__atomic_compare_exchange_n(w, &cur, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
			if (cur & LOCK_WAITERS)
				futex(w, FUTEX_WAKE, 1, NULL);
			return;
		}
	}
}

