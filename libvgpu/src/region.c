/*
 * region.c - the container's shared region: creation, validation, process
 * slots and the per-device usage counters that enforce the memory limit.
 *
 * The file can be damaged while processes use it (zeroed, overwritten by
 * another version, scribbled on), so nothing that decides who is alive or
 * who may write lives only in the file:
 *
 *  - flock(2) on the file serialises formatting and slot claims.
 *  - The process owning slot i holds an open-file-description lock on the
 *    slot's first byte (F_OFD_SETLK) for as long as it lives. The kernel
 *    drops it with the process's last reference to the file, after all its
 *    threads are gone, so "nobody holds byte i" means "the owner of slot i is
 *    dead", whatever the file says. (Robust mutexes in the file, the previous
 *    design, were marked dead when one thread died and were destroyed by
 *    anything that rewrote the file.)
 *  - The region lock is a futex word in the header naming its owner's slot.
 *    A waiter that times out checks the owner's slot lock, takes the region
 *    lock over from a dead owner and rebuilds the totals from the slots.
 *  - Every usage counter carries a check word (value ^ VGPU_CHECK_KEY) and the
 *    header an epoch that changes at every format. Each process also keeps
 *    what it has charged in private memory (g.mine), which no damage to the
 *    file can reach.
 *
 * A process that finds the region damaged (bad magic, version, sizes or check
 * words), or its own slot no longer what it wrote, formats the region in
 * place under flock and the region lock (never by rename: the directory may
 * be read-only) and re-registers from g.mine. If other processes hold slots
 * the region is marked RECOVERING: each of them notices the new epoch at its
 * next call or within a watcher period and re-registers too, and charges
 * wait until every live process has, so the limit holds through the rebuild.
 * Frees are never held up.
 *
 * Lock order: g.mu (process-local) -> flock -> region lock; nothing waits for
 * flock while holding the region lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "symbols.h"

#define LOCK_WAITERS 0x80000000u
#define LOCK_OWNER_MASK 0x7ffu          /* slot index + 1 */
#define LOCK_SEQ_SHIFT 11               /* bits 11..30: per-acquisition sequence */
#define LOCK_SEQ_MASK 0xfffffu
#define LOCK_POLL_NS (10 * 1000 * 1000) /* a waiter checks the owner this often */
#define SWEEP_NS (1000 * 1000 * 1000ull)        /* watcher's reclaim of dead slots */
#define RECOVERY_WAIT_NS (10 * 1000 * 1000 * 1000ull)
#define MAX_USAGE (UINT64_C(1) << 52)   /* no device has 4 PiB */

/*
 * This process's view of the region. Everything is guarded by `mu` except
 * `slot`, which the limiter reads without it (atomically). vgpu_region_attach
 * runs once, before any other function here.
 */
static struct {
	pthread_mutex_t mu;
	struct vgpu_region *r;
	bool shared;                    /* file-backed, else a private anonymous copy */
	int fd;                         /* shared: kept open for flock and the slot lock */
	int slot;                       /* this process's slot, -1 none */
	uint32_t token;                 /* lock word of the current region-lock hold */
	uint32_t seq;
	uint64_t epoch;                 /* header epoch this process registered under */
	uint64_t mine[VGPU_MAX_DEVICES];/* bytes this process has charged: what it re-registers */
	uint64_t host[VGPU_MAX_DEVICES];/* of those, bytes served from host memory (host.c) */
	uint64_t last_sweep_ns;
	uint32_t charges;               /* for LIBVGPU_TEST_DIE_IN_LOCK / _STOP_IN_LOCK */
	bool claim_retry;               /* the claim gave up on a stuck lock: try again */
	int32_t hostpid;
	uint32_t hostpid_source;
	char boot_id[VGPU_BOOT_ID_BYTES];
	char uuid[VGPU_MAX_DEVICES][VGPU_UUID_BYTES];
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .slot = -1};

struct vgpu_region *vgpu_region(void) { return g.r; }
bool vgpu_region_shared(void) { return g.shared; }

struct vgpu_proc_slot *vgpu_region_slot(void)
{
	int i = __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE);
	return i >= 0 && g.r != NULL ? &g.r->slots[i] : NULL;
}

/* ---- counters with check words ---- */

static void put_used(uint64_t *val, uint64_t *chk, uint64_t v)
{
	__atomic_store_n(val, v, __ATOMIC_RELAXED);
	__atomic_store_n(chk, v ^ VGPU_CHECK_KEY, __ATOMIC_RELAXED);
}

/*
 * Reads a counter once and checks it against its check word. Callers use the
 * value read here and never read the counter again: the file can be damaged
 * between two reads (the stress test caught a total zeroed in that gap).
 */
static bool get_used(const uint64_t *val, const uint64_t *chk, uint64_t *out)
{
	uint64_t v = __atomic_load_n(val, __ATOMIC_RELAXED);
	*out = v;
	return (v ^ __atomic_load_n(chk, __ATOMIC_RELAXED)) == VGPU_CHECK_KEY && v <= MAX_USAGE;
}

static bool used_ok(const uint64_t *val, const uint64_t *chk)
{
	uint64_t ignored;
	return get_used(val, chk, &ignored);
}

/* Host-backed bytes as the region publishes them: MiB, rounded up. */
static uint32_t host_mib(uint64_t bytes)
{
	uint64_t mib = (bytes + (UINT64_C(1) << 20) - 1) >> 20;
	return mib > UINT32_MAX ? UINT32_MAX : (uint32_t)mib;
}

/* ---- kernel locks on the file ---- */

static off_t slot_byte(uint32_t i) { return (off_t)VGPU_HEADER_SIZE + (off_t)i * VGPU_SLOT_SIZE; }

/*
 * How long a lock may be held with no progress before waiters give up: a
 * holder that is alive but stopped (SIGSTOP, a debugger, a frozen cgroup)
 * must not block every other process of the container forever. Legitimate
 * holds last microseconds to milliseconds. LIBVGPU_LOCK_TIMEOUT_MS (env.c).
 */
static uint64_t stuck_ns(void) { return (uint64_t)vgpu_cfg.lock_timeout_ms * 1000000u; }

/* flock(LOCK_EX), given up with ETIMEDOUT after twice the stuck time. */
static int flock_ex(int fd)
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

static int slot_lock(int cmd, short type, uint32_t i)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = slot_byte(i), .l_len = 1};
	return fcntl(g.fd, cmd, &fl);
}

/* True unless the kernel says nobody else holds slot i's lock. */
static bool slot_alive(uint32_t i)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = slot_byte(i), .l_len = 1};
	if (fcntl(g.fd, F_OFD_GETLK, &fl) != 0)
		return true;    /* cannot tell: never declare a process dead on a guess */
	return fl.l_type != F_UNLCK;
}

/*
 * Marks held[i] for every slot whose lock another open file description holds.
 * F_OFD_GETLK reports one conflicting lock of a range, not necessarily the
 * lowest, so each lock found splits its range in two still to be searched:
 * one call per lock plus one per empty gap. -1 if the kernel cannot tell.
 */
static int scan_held(bool held[VGPU_MAX_PROCS])
{
	const off_t base = slot_byte(0);
	off_t todo[2 * VGPU_MAX_PROCS + 2][2];
	int n = 0;
	memset(held, 0, VGPU_MAX_PROCS * sizeof(held[0]));
	todo[n][0] = base, todo[n][1] = slot_byte(VGPU_MAX_PROCS), n++;
	while (n > 0) {
		n--;
		off_t lo = todo[n][0], hi = todo[n][1];
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = lo, .l_len = hi - lo};
		if (fcntl(g.fd, F_OFD_GETLK, &fl) != 0)
			return -1;
		if (fl.l_type == F_UNLCK)
			continue;
		off_t a = fl.l_start > lo ? fl.l_start : lo;
		off_t b = fl.l_len == 0 || fl.l_start + fl.l_len > hi ? hi : fl.l_start + fl.l_len;
		/* Every slot whose first byte the lock covers. */
		for (off_t i = (a - base + VGPU_SLOT_SIZE - 1) / VGPU_SLOT_SIZE;
		     i < VGPU_MAX_PROCS && slot_byte((uint32_t)i) < b; i++)
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

static bool other_users(void)
{
	bool held[VGPU_MAX_PROCS];
	if (scan_held(held) != 0)
		return true;
	for (int i = 0; i < VGPU_MAX_PROCS; i++)
		if (held[i] && i != g.slot)
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
	/* Our slot: we hold g.mu, so this is a previous owner of the slot. */
	if ((int)owner - 1 == g.slot)
		return true;
	return !slot_alive(owner - 1);
}

enum { LOCK_STUCK = -1, LOCKED = 0, LOCKED_FROM_DEAD = 1 };

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
 * Takes the region lock as slot g.slot. The word carries a fresh sequence
 * number per acquisition so that a waiter can never take over a lock that a
 * new owner of the same slot acquired meanwhile (the compare-and-swap would
 * see a different word). The same sequence number tells progress: a word
 * that stays the same for stuck_ns() while its owner lives is a holder that
 * does not run; the wait ends with LOCK_STUCK.
 */
static int region_lock(struct vgpu_region *r)
{
	uint32_t last = 0;
	uint64_t since = 0;
	uint32_t *w = &r->hdr.lock.word;
	g.seq = (g.seq + 1) & LOCK_SEQ_MASK;
	if (g.seq == 0)
		g.seq = 1;
	uint32_t me = g.seq << LOCK_SEQ_SHIFT | ((uint32_t)g.slot + 1), cur = 0;
	g.token = me;
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

static void region_unlock(struct vgpu_region *r)
{
	uint32_t *w = &r->hdr.lock.word;
	uint32_t cur = __atomic_load_n(w, __ATOMIC_RELAXED);
	/* If the word is no longer ours (the file was damaged), leave it to its waiters. */
	while ((cur & ~LOCK_WAITERS) == g.token) {
		if (__atomic_compare_exchange_n(w, &cur, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
			if (cur & LOCK_WAITERS)
				futex(w, FUTEX_WAKE, 1, NULL);
			return;
		}
	}
}

/* ---- format and validation ---- */

static void read_boot_id(char out[VGPU_BOOT_ID_BYTES])
{
	memset(out, 0, VGPU_BOOT_ID_BYTES);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, VGPU_BOOT_ID_BYTES - 1);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = '\0';
}

/*
 * Each limited device's NVML UUID, looked up once before any lock is taken,
 * so the exporter can label a container's usage with the card it runs on.
 */
static void lookup_uuids(void)
{
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		g.uuid[i][0] = '\0';
		if (vgpu_cfg.mem_limit[i] == 0 && vgpu_cfg.sm_limit[i] == 0)
			continue;
		/* vgpu_nvml_device loads NVML on first use; look it up after. */
		nvmlDevice_t d = vgpu_nvml_device(i);
		if (d == NULL || REAL(nvmlDeviceGetUUID) == NULL ||
		    REAL(nvmlDeviceGetUUID)(d, g.uuid[i], VGPU_UUID_BYTES) != NVML_SUCCESS)
			g.uuid[i][0] = '\0';
		g.uuid[i][VGPU_UUID_BYTES - 1] = '\0';
	}
}

static void zero(void *from, void *to) { memset(from, 0, (size_t)((char *)to - (char *)from)); }

/*
 * Writes a fresh region; magic goes in last. The lock word is kept unless
 * reset_lock (nobody can hold it), and the words other threads of this
 * process read without g.mu (util_switch) are cleared with atomic stores.
 */
static void format_region(struct vgpu_region *r, bool recovering, bool reset_lock)
{
	struct vgpu_region_header *h = &r->hdr;
	uint64_t old_epoch = h->epoch;
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	zero(&h->version, &h->lock);
	if (reset_lock)
		__atomic_store_n(&h->lock.word, 0, __ATOMIC_RELEASE);
	zero(&h->mem_limit, &h->util_switch);
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		__atomic_store_n(&h->util_switch[i], VGPU_UTIL_SWITCH_LIMIT, __ATOMIC_RELAXED);
	zero(&h->sm_util, r + 1);
	h->version = VGPU_REGION_VERSION;
	h->header_size = VGPU_HEADER_SIZE;
	h->slot_size = VGPU_SLOT_SIZE;
	h->max_procs = VGPU_MAX_PROCS;
	h->max_devices = VGPU_MAX_DEVICES;
	h->total_size = VGPU_REGION_SIZE;
	h->created_unix_ns = vgpu_wall_ns();
	h->priority = vgpu_cfg.priority;
	h->flags = recovering ? VGPU_REGION_RECOVERING : 0;
	/* Any value a live process could still hold is a different one. */
	h->epoch = h->created_unix_ns ^ (uint64_t)getpid() << 40;
	if (h->epoch == 0 || h->epoch == old_epoch)
		h->epoch++;
	memcpy(h->boot_id, g.boot_id, sizeof(h->boot_id));
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		h->mem_limit[i] = vgpu_cfg.mem_limit[i];
		h->sm_limit[i] = vgpu_cfg.sm_limit[i];
		if (h->mem_limit[i] != 0 || h->sm_limit[i] != 0)
			h->device_count = (uint32_t)i + 1;
		put_used(&h->mem_used[i], &h->mem_used_check[i], 0);
		memcpy(h->uuid[i], g.uuid[i], VGPU_UUID_BYTES);
	}
	__atomic_store_n(&h->magic, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
}

/* Returns NULL if the header describes a usable region, else why not. */
static const char *header_invalid(const struct vgpu_region *r)
{
	const struct vgpu_region_header *h = &r->hdr;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC)
		return "has no valid magic number";
	if (h->version != VGPU_REGION_VERSION)
		return "has another layout version";
	if (h->header_size != VGPU_HEADER_SIZE || h->slot_size != VGPU_SLOT_SIZE ||
	    h->max_procs != VGPU_MAX_PROCS || h->max_devices != VGPU_MAX_DEVICES ||
	    h->total_size != VGPU_REGION_SIZE)
		return "has inconsistent sizes";
	/* Kernel locks do not survive a reboot; everything the file says about processes is stale. */
	if (g.boot_id[0] != '\0' && strncmp(g.boot_id, h->boot_id, VGPU_BOOT_ID_BYTES) != 0)
		return "was written before the last reboot";
	if (h->epoch == 0 || (h->flags & ~VGPU_REGION_RECOVERING) != 0 || h->slot_hwm > VGPU_MAX_PROCS)
		return "holds an impossible header";
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (!used_ok(&h->mem_used[i], &h->mem_used_check[i]))
			return "holds damaged usage counters";
	return NULL;
}

/* The region is still the one this process registered in, and its slot holds what it wrote. */
static bool still_mine(const struct vgpu_region *r)
{
	const struct vgpu_region_header *h = &r->hdr;
	const struct vgpu_proc_slot *s = &r->slots[g.slot];
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC ||
	    h->version != VGPU_REGION_VERSION || h->header_size != VGPU_HEADER_SIZE ||
	    h->total_size != VGPU_REGION_SIZE || h->epoch != g.epoch ||
	    __atomic_load_n(&s->status, __ATOMIC_RELAXED) != VGPU_SLOT_ACTIVE || s->epoch != g.epoch)
		return false;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		uint64_t v;
		if (!used_ok(&h->mem_used[d], &h->mem_used_check[d]) ||
		    !get_used(&s->mem_used[d], &s->mem_used_check[d], &v) || v != g.mine[d])
			return false;
	}
	return true;
}

/* Reads a slot's counters once into out[]; false if any is damaged. */
static bool slot_counters(const struct vgpu_proc_slot *s, uint64_t out[VGPU_MAX_DEVICES])
{
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		if (!get_used(&s->mem_used[d], &s->mem_used_check[d], &out[d]))
			return false;
	return true;
}

/*
 * Rebuilds the header's totals from the slots, the kernel's view of who is
 * alive and this process's own record: frees the slots of dead processes, and
 * keeps the region RECOVERING while a live process's slot is not valid (it
 * has not re-registered since a format, or was damaged). Returns the number of
 * such processes (-1: the kernel cannot say who is alive). Caller holds the
 * region lock.
 */
static int rebuild_locked(struct vgpu_region *r)
{
	struct vgpu_region_header *h = &r->hdr;
	bool held[VGPU_MAX_PROCS];
	uint64_t used[VGPU_MAX_DEVICES] = {0};
	uint32_t host[VGPU_MAX_DEVICES] = {0};
	uint32_t live = 0, hwm = 0;
	int pending = 0;

	if (scan_held(held) != 0) {
		VGPU_LOG(VGPU_LOG_ERROR, "cannot read the region's file locks: %s", strerror(errno));
		__atomic_or_fetch(&h->flags, VGPU_REGION_RECOVERING, __ATOMIC_RELAXED);
		return -1;
	}
	if (g.slot >= 0)
		held[g.slot] = true;    /* our own lock is not reported to us */
	for (uint32_t i = 0; i < VGPU_MAX_PROCS; i++) {
		struct vgpu_proc_slot *s = &r->slots[i];
		uint32_t status = __atomic_load_n(&s->status, __ATOMIC_RELAXED);
		uint64_t mem[VGPU_MAX_DEVICES];
		if (!held[i]) {
			if (status == VGPU_SLOT_FREE)
				continue;
			if (status == VGPU_SLOT_ACTIVE)
				VGPU_LOG(VGPU_LOG_INFO, "reclaimed slot %u of dead pid %d", i, s->pid);
			memset(s, 0, sizeof(*s));
			h->generation++;
			continue;
		}
		hwm = i + 1;
		if ((int)i == g.slot) {
			for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
				used[d] += g.mine[d];
				host[d] += host_mib(g.host[d]);
			}
			live++;
		} else if (status == VGPU_SLOT_TRANSIT) {
			continue;   /* being claimed or released: holds nothing */
		} else if (status != VGPU_SLOT_ACTIVE || s->epoch != h->epoch || !slot_counters(s, mem)) {
			pending++;
		} else {
			for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
				used[d] += mem[d];
				host[d] += __atomic_load_n(&s->host_mib[d], __ATOMIC_RELAXED);
			}
			live++;
		}
	}
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		put_used(&h->mem_used[d], &h->mem_used_check[d], used[d]);
		__atomic_store_n(&h->host_mib[d], host[d], __ATOMIC_RELAXED);
	}
	h->live_procs = live;
	if (hwm > h->slot_hwm)
		__atomic_store_n(&h->slot_hwm, hwm, __ATOMIC_RELEASE);
	if (pending != 0)
		__atomic_or_fetch(&h->flags, VGPU_REGION_RECOVERING, __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(&h->flags, ~VGPU_REGION_RECOVERING, __ATOMIC_RELAXED);
	return pending;
}

/* Writes this process's slot from its own record. Caller holds the region lock. */
static void write_slot_locked(struct vgpu_region *r)
{
	struct vgpu_proc_slot *s = &r->slots[g.slot];
	uint32_t hwm = __atomic_load_n(&r->hdr.slot_hwm, __ATOMIC_RELAXED);
	__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
	zero(s->pad_lock, &s->status);
	zero(&s->pid, s + 1);
	s->pid = (int32_t)getpid();
	s->hostpid = g.hostpid;
	s->hostpid_source = g.hostpid_source;
	s->priority = vgpu_cfg.priority;
	s->start_unix_ns = vgpu_wall_ns();
	s->epoch = r->hdr.epoch;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		put_used(&s->mem_used[d], &s->mem_used_check[d], g.mine[d]);
		s->host_mib[d] = host_mib(g.host[d]);
	}
	__atomic_store_n(&s->status, VGPU_SLOT_ACTIVE, __ATOMIC_RELEASE);
	if ((uint32_t)g.slot + 1 > hwm)
		__atomic_store_n(&r->hdr.slot_hwm, (uint32_t)g.slot + 1, __ATOMIC_RELEASE);
	r->hdr.generation++;
	g.epoch = r->hdr.epoch;
}

/*
 * The region is not what this process registered in: formatted by someone
 * else, or damaged. Formats it if the header is unusable, then re-registers
 * this process from g.mine. Caller holds g.mu, not the region lock.
 */
static int recover(void)
{
	struct vgpu_region *r = g.r;
	if (g.fd < 0 || flock_ex(g.fd) != 0)
		return -1;
	int how = region_lock(r);
	if (how == LOCK_STUCK) {
		flock(g.fd, LOCK_UN);
		return -1;
	}
	if (how == LOCKED_FROM_DEAD)
		VGPU_LOG(VGPU_LOG_WARN, "a process died holding the region lock");
	const char *why = header_invalid(r);
	if (why != NULL) {
		bool others = other_users();
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it%s", vgpu_cfg.region_path,
			 why, others ? " (other live processes re-register)" : "");
		format_region(r, others, false);
	} else if (r->hdr.epoch != g.epoch) {
		VGPU_LOG(VGPU_LOG_INFO, "shared region was re-initialised; re-registering %llu bytes",
			 (unsigned long long)g.mine[0]);
	} else {
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s: this process's slot or the totals were damaged; repairing",
			 vgpu_cfg.region_path);
	}
	write_slot_locked(r);
	rebuild_locked(r);
	region_unlock(r);
	flock(g.fd, LOCK_UN);
	return 0;
}

/*
 * Takes the region lock and makes sure the region is still the one this
 * process registered in, repairing it first if not. Caller holds g.mu.
 * Returns 0 with the lock held; -1 if this process has no usable slot.
 */
static int claim_shared(void);

static int enter(void)
{
	/* A claim that gave up on a stuck lock is tried again: the holder may have gone on. */
	if (g.slot < 0 && g.shared && g.claim_retry && claim_shared() == 0)
		g.claim_retry = false;
	if (g.slot < 0)
		return -1;
	if (!g.shared)
		return 0;   /* private: g.mu is the lock */
	for (int attempt = 0; attempt < 3; attempt++) {
		int how = region_lock(g.r);
		if (how == LOCK_STUCK)
			return -1;
		if (still_mine(g.r)) {
			if (how == LOCKED_FROM_DEAD) {
				VGPU_LOG(VGPU_LOG_WARN, "a process died holding the region lock; rebuilding the totals");
				rebuild_locked(g.r);
			}
			return 0;
		}
		region_unlock(g.r);
		if (recover() != 0)
			break;
	}
	return -1;
}

static void leave(void)
{
	if (g.shared)
		region_unlock(g.r);
}

/* ---- attach, claim, release ---- */

static int attach_shared(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	struct stat st;
	void *map = MAP_FAILED;

	if (fd < 0) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot open shared region %s: %s", path, strerror(errno));
		return -1;
	}
	/* A stuck lock holder: attach without formatting; registration formats if need be. */
	bool locked = flock_ex(fd) == 0;
	if (!locked && errno != ETIMEDOUT) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot lock shared region %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s is not a regular file", path);
		goto fail;
	}
	/* Only ever grow the file, in place: others may have it mapped, and the
	 * directory may be read-only (no temporary files, no rename). */
	if (st.st_size < (off_t)VGPU_REGION_SIZE && ftruncate(fd, VGPU_REGION_SIZE) != 0) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot size shared region %s: %s", path, strerror(errno));
		goto fail;
	}
	map = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot map shared region %s: %s", path, strerror(errno));
		goto fail;
	}
	g.r = map;
	g.fd = fd;
	g.shared = true;
	/*
	 * A short file is a crash or a copy gone wrong. A damaged region that
	 * live processes hold is left to them and to this process's registration,
	 * which format it under the region lock.
	 */
	const char *why = st.st_size < (off_t)VGPU_REGION_SIZE ? "is truncated" : header_invalid(g.r);
	if (locked && why != NULL && !other_users()) {
		if (st.st_size != 0)
			VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it", path, why);
		format_region(g.r, false, true);
		if (fchmod(fd, 0666) != 0)
			VGPU_LOG(VGPU_LOG_DEBUG, "fchmod %s: %s", path, strerror(errno));
	}
	flock(fd, LOCK_UN);
	VGPU_LOG(VGPU_LOG_DEBUG, "attached shared region %s", path);
	return 0;
fail:
	flock(fd, LOCK_UN);
	close(fd);
	return -1;
}

int vgpu_region_attach(void)
{
	read_boot_id(g.boot_id);
	lookup_uuids();
	if (vgpu_cfg.region_path[0] != '\0' && attach_shared(vgpu_cfg.region_path) == 0)
		return 0;
	if (vgpu_cfg.region_path[0] != '\0')
		VGPU_LOG(VGPU_LOG_WARN, "limits will be enforced per process only");
	/* Private copy-on-write mapping: a forked child re-formats its own copy. */
	void *map = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		VGPU_LOG(VGPU_LOG_ERROR, "cannot map a private region: %s", strerror(errno));
		return -1;
	}
	format_region(map, false, true);
	g.r = map;
	g.shared = false;
	return 0;
}

/*
 * Wins a slot's file lock (the kernel arbitrates), free slots first, then
 * slots the file says are live (their owners may be dead). Caller holds flock.
 */
static int pick_slot(void)
{
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < VGPU_MAX_PROCS; i++) {
			struct vgpu_proc_slot *s = &g.r->slots[i];
			bool is_free = __atomic_load_n(&s->status, __ATOMIC_RELAXED) == VGPU_SLOT_FREE;
			if (is_free != (pass == 0) || slot_lock(F_OFD_SETLK, F_WRLCK, i) != 0)
				continue;
			/* Ours until we die; rebuilds count it as holding nothing until registered. */
			__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
			return (int)i;
		}
	return -1;
}

static int claim_shared(void)
{
	if (g.fd < 0) {
		/* After fork: our own open file description, not the parent's. */
		g.fd = open(vgpu_cfg.region_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (g.fd < 0) {
			VGPU_LOG(VGPU_LOG_ERROR, "cannot reopen shared region %s: %s; refusing allocations",
				 vgpu_cfg.region_path, strerror(errno));
			return -1;
		}
	}
	g.hostpid = vgpu_hostpid();
	g.hostpid_source = vgpu_hostpid_source();
	/* Lock words of a dead previous owner of our slot must not repeat. */
	g.seq = (uint32_t)(vgpu_wall_ns() ^ (uint64_t)getpid() * 2654435761u) & LOCK_SEQ_MASK;
	if (flock_ex(g.fd) != 0) {
		g.claim_retry = errno == ETIMEDOUT;
		return -1;
	}
	int i = pick_slot();
	if (i < 0) {
		flock(g.fd, LOCK_UN);
		VGPU_LOG(VGPU_LOG_ERROR, "no region slot can be locked (%d in use?): %s; refusing this "
			 "process's allocations", VGPU_MAX_PROCS, strerror(errno));
		return -1;
	}
	__atomic_store_n(&g.slot, i, __ATOMIC_RELEASE);
	struct vgpu_region *r = g.r;
	if (region_lock(r) == LOCK_STUCK) {
		__atomic_store_n(&g.slot, -1, __ATOMIC_RELEASE);
		__atomic_store_n(&r->slots[i].status, VGPU_SLOT_FREE, __ATOMIC_RELAXED);
		slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)i);
		flock(g.fd, LOCK_UN);
		g.claim_retry = true;
		return -1;
	}
	const char *why = header_invalid(r);
	if (why != NULL) {
		bool others = other_users();
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it%s", vgpu_cfg.region_path,
			 why, others ? " (other live processes re-register)" : "");
		format_region(r, others, false);
	}
	write_slot_locked(r);
	rebuild_locked(r);
	region_unlock(r);
	flock(g.fd, LOCK_UN);
	return 0;
}

/*
 * Claims a slot for this process. In a shared region the slot's file lock is
 * this process's liveness, so any thread may claim it.
 */
int vgpu_region_claim_slot(void)
{
	int rc = 0;
	if (g.r == NULL)
		return -1;
	pthread_mutex_lock(&g.mu);
	if (g.slot < 0 && g.shared) {
		rc = claim_shared();
	} else if (g.slot < 0) {
		g.hostpid = vgpu_hostpid();
		g.hostpid_source = vgpu_hostpid_source();
		__atomic_store_n(&g.slot, 0, __ATOMIC_RELEASE);
		g.epoch = g.r->hdr.epoch;
		write_slot_locked(g.r);
		g.r->hdr.live_procs = 1;
	}
	pthread_mutex_unlock(&g.mu);
	return rc;
}

/* Gives the slot back on a normal exit so the exporter sees it at once. */
void vgpu_region_release_slot(void)
{
	struct vgpu_region *r = g.r;
	if (r == NULL)
		return;
	pthread_mutex_lock(&g.mu);
	if (g.slot >= 0 && g.shared && region_lock(r) == LOCK_STUCK) {
		/* The others reclaim the slot as a dead process's once its lock is gone. */
		slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)g.slot);
	} else if (g.slot >= 0 && g.shared) {
		if (still_mine(r)) {
			struct vgpu_region_header *h = &r->hdr;
			for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
				uint64_t total;
				if (get_used(&h->mem_used[d], &h->mem_used_check[d], &total))
					put_used(&h->mem_used[d], &h->mem_used_check[d],
						 total > g.mine[d] ? total - g.mine[d] : 0);
			}
			if (h->live_procs > 0)
				h->live_procs--;
			h->generation++;
		}
		struct vgpu_proc_slot *s = &r->slots[g.slot];
		__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
		zero(&s->pid, s + 1);
		region_unlock(r);
		__atomic_store_n(&s->status, VGPU_SLOT_FREE, __ATOMIC_RELEASE);
		slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)g.slot);
	}
	__atomic_store_n(&g.slot, -1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g.mu);
}

void vgpu_region_after_fork(void)
{
	/* The child owns no slot and none of the parent's allocations. */
	pthread_mutex_init(&g.mu, NULL);
	__atomic_store_n(&g.slot, -1, __ATOMIC_RELEASE);
	g.epoch = 0;
	g.charges = 0;
	g.last_sweep_ns = 0;
	memset(g.mine, 0, sizeof(g.mine));
	memset(g.host, 0, sizeof(g.host));
	if (g.shared && g.fd >= 0) {
		/* It shares the parent's open file description, and so its slot lock. */
		close(g.fd);
		g.fd = -1;
	}
	if (g.r != NULL && !g.shared)
		format_region(g.r, false, true);
}

/* ---- usage ---- */

/* Sets this process's usage on device idx to `now`, slot first. Region locked, still_mine. */
static void set_mine_locked(int idx, uint64_t now, bool charge)
{
	struct vgpu_region_header *h = &g.r->hdr;
	struct vgpu_proc_slot *s = &g.r->slots[g.slot];
	uint64_t old = g.mine[idx];
	put_used(&s->mem_used[idx], &s->mem_used_check[idx], now);
	if (charge && (vgpu_cfg.test_die_in_lock != 0 || vgpu_cfg.test_stop_in_lock != 0)) {
		++g.charges;
		if (g.charges == vgpu_cfg.test_die_in_lock)
			kill(getpid(), SIGKILL);    /* test hook: die mid-update, holding the lock */
		if (g.charges == vgpu_cfg.test_stop_in_lock)
			kill(getpid(), SIGSTOP);    /* test hook: stop holding the lock, until SIGCONT */
	}
	g.mine[idx] = now;
	/* Re-checked here: the file may have been damaged since still_mine(). */
	uint64_t total;
	if (!get_used(&h->mem_used[idx], &h->mem_used_check[idx], &total)) {
		rebuild_locked(g.r);
		return;
	}
	total = now >= old ? total + (now - old) : (total > old - now ? total - (old - now) : 0);
	put_used(&h->mem_used[idx], &h->mem_used_check[idx], total);
}

static int charge_locked(int idx, uint64_t bytes, uint64_t limit)
{
	uint64_t deadline = 0;
	bool swept = false;
	for (;;) {
		if (enter() != 0)
			return -1;  /* no usable region: refuse rather than guess */
		struct vgpu_region *r = g.r;
		bool waiting = g.shared &&
			       (__atomic_load_n(&r->hdr.flags, __ATOMIC_RELAXED) & VGPU_REGION_RECOVERING) &&
			       rebuild_locked(r) != 0;
		uint64_t used = 0;
		if (!waiting && !get_used(&r->hdr.mem_used[idx], &r->hdr.mem_used_check[idx], &used)) {
			/* Damaged since still_mine(): recount from the slots, then read again. */
			waiting = rebuild_locked(r) != 0 ||
				  !get_used(&r->hdr.mem_used[idx], &r->hdr.mem_used_check[idx], &used);
		}
		if (!waiting) {
			if (limit == 0 || (used <= limit && bytes <= limit - used)) {
				set_mine_locked(idx, g.mine[idx] + bytes, true);
				leave();
				return 0;
			}
			/* Over the limit: dead processes may still be counted. */
			if (swept || !g.shared) {
				leave();
				return -1;
			}
			swept = true;
			rebuild_locked(r);
			leave();
			continue;
		}
		leave();
		/* Live processes have not re-registered since a rebuild: they will within a watcher period. */
		uint64_t now = vgpu_now_ns();
		if (deadline == 0) {
			deadline = now + RECOVERY_WAIT_NS;
		} else if (now > deadline) {
			VGPU_LOG(VGPU_LOG_WARN, "shared region still recovering after %llu s; refusing %llu bytes",
				 RECOVERY_WAIT_NS / 1000000000ull, (unsigned long long)bytes);
			return -1;
		}
		pthread_mutex_unlock(&g.mu);
		struct timespec pause = {0, 2 * 1000 * 1000};
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&g.mu);
	}
}

int vgpu_region_charge(int idx, uint64_t bytes, uint64_t limit)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&g.mu);
	int rc = charge_locked(idx, bytes, limit);
	pthread_mutex_unlock(&g.mu);
	return rc;
}

void vgpu_region_force(int idx, int64_t delta)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES || delta == 0)
		return;
	pthread_mutex_lock(&g.mu);
	uint64_t now = g.mine[idx];
	if (delta < 0)
		/* never give back more than this process holds */
		now -= (uint64_t)(-delta) < now ? (uint64_t)(-delta) : now;
	else
		now += (uint64_t)delta;
	if (enter() == 0) {
		set_mine_locked(idx, now, false);
		leave();
	} else {
		g.mine[idx] = now;  /* the region is unusable; the record stays right */
	}
	pthread_mutex_unlock(&g.mu);
}

uint64_t vgpu_region_used(int idx)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&g.mu);
	uint64_t used = g.shared ? g.r->hdr.mem_used[idx] : g.mine[idx];
	pthread_mutex_unlock(&g.mu);
	return used;
}

/*
 * Called by the watcher thread every 100 ms: re-registers after a rebuild or
 * damage (enter() does), finishes a recovery nobody is charging through, and
 * once a second reclaims the slots of dead processes so that the exporter
 * sees their usage go.
 */
void vgpu_region_watch(void)
{
	if (!g.shared)
		return;
	pthread_mutex_lock(&g.mu);
	if (g.slot >= 0 && enter() == 0) {
		uint64_t now = vgpu_now_ns();
		if (now - g.last_sweep_ns >= SWEEP_NS ||
		    (__atomic_load_n(&g.r->hdr.flags, __ATOMIC_RELAXED) & VGPU_REGION_RECOVERING)) {
			rebuild_locked(g.r);
			g.last_sweep_ns = now;
		}
		leave();
	}
	pthread_mutex_unlock(&g.mu);
}

/* Pids NVML may report for this container's live processes, and our own. */
int vgpu_region_pids(unsigned int *pids, int max, unsigned int *self)
{
	int n = 0;
	*self = 0;
	if (g.r == NULL)
		return 0;
	pthread_mutex_lock(&g.mu);
	uint32_t hwm = __atomic_load_n(&g.r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < hwm && i < VGPU_MAX_PROCS && n < max; i++) {
		const struct vgpu_proc_slot *s = &g.r->slots[i];
		if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
			continue;
		int32_t hp = __atomic_load_n(&s->hostpid, __ATOMIC_RELAXED);
		pids[n++] = (unsigned int)(hp > 0 ? hp : __atomic_load_n(&s->pid, __ATOMIC_RELAXED));
	}
	if (g.slot >= 0)
		*self = (unsigned int)__atomic_load_n(&g.r->slots[g.slot].hostpid, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g.mu);
	return n;
}

int vgpu_region_procs(int idx, struct vgpu_rproc *out, int max)
{
	int n = 0;
	if (g.r == NULL)
		return 0;
	pthread_mutex_lock(&g.mu);
	uint32_t hwm = __atomic_load_n(&g.r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < hwm && i < VGPU_MAX_PROCS && n < max; i++) {
		const struct vgpu_proc_slot *s = &g.r->slots[i];
		uint64_t mem = UINT64_MAX;
		if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
			continue;
		if (idx >= 0 && idx < VGPU_MAX_DEVICES &&
		    !get_used(&s->mem_used[idx], &s->mem_used_check[idx], &mem))
			mem = UINT64_MAX;
		out[n++] = (struct vgpu_rproc){__atomic_load_n(&s->hostpid, __ATOMIC_RELAXED),
					       __atomic_load_n(&s->pid, __ATOMIC_RELAXED), mem};
	}
	pthread_mutex_unlock(&g.mu);
	return n;
}

/* Publishes SM utilisation: this process's share and the container's. */
void vgpu_region_set_util(int idx, uint32_t mine, uint32_t total)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	pthread_mutex_lock(&g.mu);
	if (g.slot >= 0)
		__atomic_store_n(&g.r->slots[g.slot].sm_util[idx], mine, __ATOMIC_RELAXED);
	__atomic_store_n(&g.r->hdr.sm_util[idx], total, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g.mu);
}

/* Records this process's host pid, learned after registration (hostpid.c). */
void vgpu_region_set_hostpid(int32_t pid, uint32_t source)
{
	pthread_mutex_lock(&g.mu);
	g.hostpid = pid;
	g.hostpid_source = source;
	if (g.r != NULL && g.slot >= 0) {
		struct vgpu_proc_slot *s = &g.r->slots[g.slot];
		__atomic_store_n(&s->hostpid_source, source, __ATOMIC_RELAXED);
		__atomic_store_n(&s->hostpid, pid, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g.mu);
}

/* Publishes how the SM limit of device idx is enforced (VGPU_SM_MODE_*). */
void vgpu_region_set_sm_mode(int idx, uint32_t mode)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	__atomic_store_n(&g.r->hdr.sm_mode[idx], mode, __ATOMIC_RELAXED);
}

/*
 * Records that `delta` bytes of this process's usage on device idx are (no
 * longer) served from host memory, and republishes the container's total.
 */
void vgpu_region_host(int idx, int64_t delta)
{
	if (g.r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return;
	pthread_mutex_lock(&g.mu);
	uint64_t now = g.host[idx];
	g.host[idx] = delta < 0 && (uint64_t)-delta > now ? 0 : now + (uint64_t)delta;
	if (g.slot >= 0)
		__atomic_store_n(&g.r->slots[g.slot].host_mib[idx], host_mib(g.host[idx]),
				 __ATOMIC_RELAXED);
	if (enter() == 0) {
		uint32_t total = 0;
		uint32_t hwm = __atomic_load_n(&g.r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; i < hwm && i < VGPU_MAX_PROCS; i++)
			if (__atomic_load_n(&g.r->slots[i].status, __ATOMIC_ACQUIRE) == VGPU_SLOT_ACTIVE)
				total += __atomic_load_n(&g.r->slots[i].host_mib[idx], __ATOMIC_RELAXED);
		__atomic_store_n(&g.r->hdr.host_mib[idx], total, __ATOMIC_RELAXED);
		leave();
	}
	pthread_mutex_unlock(&g.mu);
}
