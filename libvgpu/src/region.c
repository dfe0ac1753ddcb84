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
 *    what it has charged in private memory (vgpu_rs.mine), which no damage to the
 *    file can reach.
 *
 * A process that finds the region damaged (bad magic, version, sizes or check
 * words), or its own slot no longer what it wrote, formats the region in
 * place under flock and the region lock (never by rename: the directory may
 * be read-only) and re-registers from vgpu_rs.mine. If other processes hold slots
 * the region is marked RECOVERING: each of them notices the new epoch at its
 * next call or within a watcher period and re-registers too, and charges
 * wait until every live process has, so the limit holds through the rebuild.
 * Frees are never held up.
 *
 * Lock order: vgpu_rs.mu (process-local) -> flock -> region lock; nothing waits for
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

#include "log.h"
#include "region_int.h"
#include "symbols.h"

#define MAX_USAGE (UINT64_C(1) << 52)   /* no device has 4 PiB */

struct region_state vgpu_rs = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .slot = -1};

struct vgpu_region *vgpu_region(void) { return vgpu_rs.r; }
bool vgpu_region_shared(void) { return vgpu_rs.shared; }

struct vgpu_proc_slot *vgpu_region_slot(void)
{
	int i = __atomic_load_n(&vgpu_rs.slot, __ATOMIC_ACQUIRE);
	return i >= 0 && vgpu_rs.r != NULL ? &vgpu_rs.r->slots[i] : NULL;
}

/* ---- counters with check words ---- */

void rg_put_used(uint64_t *val, uint64_t *chk, uint64_t v)
{
	__atomic_store_n(val, v, __ATOMIC_RELAXED);
	__atomic_store_n(chk, v ^ VGPU_CHECK_KEY, __ATOMIC_RELAXED);
}

/*
 * Reads a counter once and checks it against its check word. Callers use the
 * value read here and never read the counter again: the file can be damaged
 * between two reads (the stress test caught a total zeroed in that gap).
 */
bool rg_get_used(const uint64_t *val, const uint64_t *chk, uint64_t *out)
{
	uint64_t v = __atomic_load_n(val, __ATOMIC_RELAXED);
	*out = v;
	return (v ^ __atomic_load_n(chk, __ATOMIC_RELAXED)) == VGPU_CHECK_KEY && v <= MAX_USAGE;
}

bool rg_used_ok(const uint64_t *val, const uint64_t *chk)
{
	uint64_t ignored;
	return rg_get_used(val, chk, &ignored);
}

/* Host-backed bytes as the region publishes them: MiB, rounded up. */
uint32_t rg_host_mib(uint64_t bytes)
{
	uint64_t mib = (bytes + (UINT64_C(1) << 20) - 1) >> 20;
	return mib > UINT32_MAX ? UINT32_MAX : (uint32_t)mib;
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
	vgpu_rs.ndev = vgpu_nvml_count();
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		vgpu_rs.uuid[i][0] = '\0';
		if (vgpu_cfg.mem_limit[i] == 0 && vgpu_cfg.sm_limit[i] == 0)
			continue;
		/* vgpu_nvml_device loads NVML on first use; look it up after. */
		nvmlDevice_t d = vgpu_nvml_device(i);
		if (d == NULL || REAL(nvmlDeviceGetUUID) == NULL ||
		    REAL(nvmlDeviceGetUUID)(d, vgpu_rs.uuid[i], VGPU_UUID_BYTES) != NVML_SUCCESS)
			vgpu_rs.uuid[i][0] = '\0';
		vgpu_rs.uuid[i][VGPU_UUID_BYTES - 1] = '\0';
	}
}

void rg_zero(void *from, void *to) { memset(from, 0, (size_t)((char *)to - (char *)from)); }

/*
 * Writes a fresh region; magic goes in last. The lock word is kept unless
 * reset_lock (nobody can hold it), and the words other threads of this
 * process read without vgpu_rs.mu (util_switch) are cleared with atomic stores.
 */
static void format_region(struct vgpu_region *r, bool recovering, bool reset_lock)
{
	struct vgpu_region_header *h = &r->hdr;
	uint64_t old_epoch = h->epoch;
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	rg_zero(&h->version, &h->lock);
	if (reset_lock)
		__atomic_store_n(&h->lock.word, 0, __ATOMIC_RELEASE);
	rg_zero(&h->mem_limit, &h->util_switch);
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		__atomic_store_n(&h->util_switch[i], VGPU_UTIL_SWITCH_LIMIT, __ATOMIC_RELAXED);
	rg_zero(&h->sm_util, r + 1);
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
	memcpy(h->boot_id, vgpu_rs.boot_id, sizeof(h->boot_id));
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		h->mem_limit[i] = vgpu_cfg.mem_limit[i];
		h->sm_limit[i] = vgpu_cfg.sm_limit[i];
		/*
		 * An unindexed limit (CUDA_DEVICE_SM_LIMIT) covers every index; the
		 * devices the container has are the ones NVML shows it, when known.
		 */
		if ((h->mem_limit[i] != 0 || h->sm_limit[i] != 0) &&
		    (vgpu_rs.ndev == 0 || i < vgpu_rs.ndev))
			h->device_count = (uint32_t)i + 1;
		rg_put_used(&h->mem_used[i], &h->mem_used_check[i], 0);
		memcpy(h->uuid[i], vgpu_rs.uuid[i], VGPU_UUID_BYTES);
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
	if (vgpu_rs.boot_id[0] != '\0' && strncmp(vgpu_rs.boot_id, h->boot_id, VGPU_BOOT_ID_BYTES) != 0)
		return "was written before the last reboot";
	if (h->epoch == 0 || (h->flags & ~VGPU_REGION_RECOVERING) != 0 || h->slot_hwm > VGPU_MAX_PROCS)
		return "holds an impossible header";
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (!rg_used_ok(&h->mem_used[i], &h->mem_used_check[i]))
			return "holds damaged usage counters";
	return NULL;
}

/* The region is still the one this process registered in, and its slot holds what it wrote. */
static bool still_mine(const struct vgpu_region *r)
{
	const struct vgpu_region_header *h = &r->hdr;
	const struct vgpu_proc_slot *s = &r->slots[vgpu_rs.slot];
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC ||
	    h->version != VGPU_REGION_VERSION || h->header_size != VGPU_HEADER_SIZE ||
	    h->total_size != VGPU_REGION_SIZE || h->epoch != vgpu_rs.epoch ||
	    __atomic_load_n(&s->status, __ATOMIC_RELAXED) != VGPU_SLOT_ACTIVE || s->epoch != vgpu_rs.epoch)
		return false;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		uint64_t v;
		if (!rg_used_ok(&h->mem_used[d], &h->mem_used_check[d]) ||
		    !rg_get_used(&s->mem_used[d], &s->mem_used_check[d], &v) || v != vgpu_rs.mine[d])
			return false;
	}
	return true;
}

/* Reads a slot's counters once into out[]; false if any is damaged. */
static bool slot_counters(const struct vgpu_proc_slot *s, uint64_t out[VGPU_MAX_DEVICES])
{
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		if (!rg_get_used(&s->mem_used[d], &s->mem_used_check[d], &out[d]))
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
int rg_rebuild_locked(struct vgpu_region *r)
{
	struct vgpu_region_header *h = &r->hdr;
	bool held[VGPU_MAX_PROCS];
	uint64_t used[VGPU_MAX_DEVICES] = {0};
	uint32_t host[VGPU_MAX_DEVICES] = {0};
	uint32_t live = 0, hwm = 0;
	int pending = 0;

	if (rg_scan_held(held) != 0) {
		VGPU_LOG(VGPU_LOG_ERROR, "cannot read the region's file locks: %s", strerror(errno));
		__atomic_or_fetch(&h->flags, VGPU_REGION_RECOVERING, __ATOMIC_RELAXED);
		return -1;
	}
	if (vgpu_rs.slot >= 0)
		held[vgpu_rs.slot] = true;    /* our own lock is not reported to us */
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
		if ((int)i == vgpu_rs.slot) {
			for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
				used[d] += vgpu_rs.mine[d];
				host[d] += rg_host_mib(vgpu_rs.host[d]);
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
		rg_put_used(&h->mem_used[d], &h->mem_used_check[d], used[d]);
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
	struct vgpu_proc_slot *s = &r->slots[vgpu_rs.slot];
	uint32_t hwm = __atomic_load_n(&r->hdr.slot_hwm, __ATOMIC_RELAXED);
	__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
	rg_zero(s->pad_lock, &s->status);
	rg_zero(&s->pid, s + 1);
	s->pid = (int32_t)getpid();
	s->hostpid = vgpu_rs.hostpid;
	s->hostpid_source = vgpu_rs.hostpid_source;
	s->priority = vgpu_cfg.priority;
	s->start_unix_ns = vgpu_wall_ns();
	s->epoch = r->hdr.epoch;
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		rg_put_used(&s->mem_used[d], &s->mem_used_check[d], vgpu_rs.mine[d]);
		s->host_mib[d] = rg_host_mib(vgpu_rs.host[d]);
	}
	__atomic_store_n(&s->status, VGPU_SLOT_ACTIVE, __ATOMIC_RELEASE);
	if ((uint32_t)vgpu_rs.slot + 1 > hwm)
		__atomic_store_n(&r->hdr.slot_hwm, (uint32_t)vgpu_rs.slot + 1, __ATOMIC_RELEASE);
	r->hdr.generation++;
	vgpu_rs.epoch = r->hdr.epoch;
}

/*
 * The region is not what this process registered in: formatted by someone
 * else, or damaged. Formats it if the header is unusable, then re-registers
 * this process from vgpu_rs.mine. Caller holds vgpu_rs.mu, not the region lock.
 */
static int recover(void)
{
	struct vgpu_region *r = vgpu_rs.r;
	if (vgpu_rs.fd < 0 || rg_flock_ex(vgpu_rs.fd) != 0)
		return -1;
	int how = rg_region_lock(r);
	if (how == LOCK_STUCK) {
		flock(vgpu_rs.fd, LOCK_UN);
		return -1;
	}
	if (how == LOCKED_FROM_DEAD)
		VGPU_LOG(VGPU_LOG_WARN, "a process died holding the region lock");
	const char *why = header_invalid(r);
	if (why != NULL) {
		bool others = rg_other_users();
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it%s", vgpu_cfg.region_path,
			 why, others ? " (other live processes re-register)" : "");
		format_region(r, others, false);
	} else if (r->hdr.epoch != vgpu_rs.epoch) {
		VGPU_LOG(VGPU_LOG_INFO, "shared region was re-initialised; re-registering %llu bytes",
			 (unsigned long long)vgpu_rs.mine[0]);
	} else {
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s: this process's slot or the totals were damaged; repairing",
			 vgpu_cfg.region_path);
	}
	write_slot_locked(r);
	rg_rebuild_locked(r);
	rg_region_unlock(r);
	flock(vgpu_rs.fd, LOCK_UN);
	return 0;
}

/*
 * Takes the region lock and makes sure the region is still the one this
 * process registered in, repairing it first if not. Caller holds vgpu_rs.mu.
 * Returns 0 with the lock held; -1 if this process has no usable slot.
 */
static int claim_shared(void);

int rg_enter(void)
{
	/* A claim that gave up on a stuck lock is tried again: the holder may have gone on. */
	if (vgpu_rs.slot < 0 && vgpu_rs.shared && vgpu_rs.claim_retry && claim_shared() == 0)
		vgpu_rs.claim_retry = false;
	if (vgpu_rs.slot < 0)
		return -1;
	if (!vgpu_rs.shared)
		return 0;   /* private: vgpu_rs.mu is the lock */
	for (int attempt = 0; attempt < 3; attempt++) {
		int how = rg_region_lock(vgpu_rs.r);
		if (how == LOCK_STUCK)
			return -1;
		if (still_mine(vgpu_rs.r)) {
			if (how == LOCKED_FROM_DEAD) {
				VGPU_LOG(VGPU_LOG_WARN, "a process died holding the region lock; rebuilding the totals");
				rg_rebuild_locked(vgpu_rs.r);
			}
			return 0;
		}
		rg_region_unlock(vgpu_rs.r);
		if (recover() != 0)
			break;
	}
	return -1;
}

void rg_leave(void)
{
	if (vgpu_rs.shared)
		rg_region_unlock(vgpu_rs.r);
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
	bool locked = rg_flock_ex(fd) == 0;
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
	vgpu_rs.r = map;
	vgpu_rs.fd = fd;
	vgpu_rs.shared = true;
	/*
	 * A short file is a crash or a copy gone wrong. A damaged region that
	 * live processes hold is left to them and to this process's registration,
	 * which format it under the region lock.
	 */
	const char *why = st.st_size < (off_t)VGPU_REGION_SIZE ? "is truncated" : header_invalid(vgpu_rs.r);
	if (locked && why != NULL && !rg_other_users()) {
		if (st.st_size != 0)
			VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it", path, why);
		format_region(vgpu_rs.r, false, true);
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
	read_boot_id(vgpu_rs.boot_id);
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
	vgpu_rs.r = map;
	vgpu_rs.shared = false;
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
			struct vgpu_proc_slot *s = &vgpu_rs.r->slots[i];
			bool is_free = __atomic_load_n(&s->status, __ATOMIC_RELAXED) == VGPU_SLOT_FREE;
			if (is_free != (pass == 0) || rg_slot_lock(F_OFD_SETLK, F_WRLCK, i) != 0)
				continue;
			/* Ours until we die; rebuilds count it as holding nothing until registered. */
			__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
			return (int)i;
		}
	return -1;
}

static int claim_shared(void)
{
	if (vgpu_rs.fd < 0) {
		/* After fork: our own open file description, not the parent's. */
		vgpu_rs.fd = open(vgpu_cfg.region_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (vgpu_rs.fd < 0) {
			VGPU_LOG(VGPU_LOG_ERROR, "cannot reopen shared region %s: %s; refusing allocations",
				 vgpu_cfg.region_path, strerror(errno));
			return -1;
		}
	}
	vgpu_rs.hostpid = vgpu_hostpid();
	vgpu_rs.hostpid_source = vgpu_hostpid_source();
	/* Lock words of a dead previous owner of our slot must not repeat. */
	vgpu_rs.seq = (uint32_t)(vgpu_wall_ns() ^ (uint64_t)getpid() * 2654435761u) & LOCK_SEQ_MASK;
	if (rg_flock_ex(vgpu_rs.fd) != 0) {
		vgpu_rs.claim_retry = errno == ETIMEDOUT;
		return -1;
	}
	int i = pick_slot();
	if (i < 0) {
		flock(vgpu_rs.fd, LOCK_UN);
		VGPU_LOG(VGPU_LOG_ERROR, "no region slot can be locked (%d in use?): %s; refusing this "
			 "process's allocations", VGPU_MAX_PROCS, strerror(errno));
		return -1;
	}
	__atomic_store_n(&vgpu_rs.slot, i, __ATOMIC_RELEASE);
	struct vgpu_region *r = vgpu_rs.r;
	if (rg_region_lock(r) == LOCK_STUCK) {
		__atomic_store_n(&vgpu_rs.slot, -1, __ATOMIC_RELEASE);
		__atomic_store_n(&r->slots[i].status, VGPU_SLOT_FREE, __ATOMIC_RELAXED);
		rg_slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)i);
		flock(vgpu_rs.fd, LOCK_UN);
		vgpu_rs.claim_retry = true;
		return -1;
	}
	const char *why = header_invalid(r);
	if (why != NULL) {
		bool others = rg_other_users();
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it%s", vgpu_cfg.region_path,
			 why, others ? " (other live processes re-register)" : "");
		format_region(r, others, false);
	}
	write_slot_locked(r);
	rg_rebuild_locked(r);
	rg_region_unlock(r);
	flock(vgpu_rs.fd, LOCK_UN);
	return 0;
}

/*
 * Claims a slot for this process. In a shared region the slot's file lock is
 * this process's liveness, so any thread may claim it.
 */
int vgpu_region_claim_slot(void)
{
	int rc = 0;
	if (vgpu_rs.r == NULL)
		return -1;
	pthread_mutex_lock(&vgpu_rs.mu);
	if (vgpu_rs.slot < 0 && vgpu_rs.shared) {
		rc = claim_shared();
	} else if (vgpu_rs.slot < 0) {
		vgpu_rs.hostpid = vgpu_hostpid();
		vgpu_rs.hostpid_source = vgpu_hostpid_source();
		__atomic_store_n(&vgpu_rs.slot, 0, __ATOMIC_RELEASE);
		vgpu_rs.epoch = vgpu_rs.r->hdr.epoch;
		write_slot_locked(vgpu_rs.r);
		vgpu_rs.r->hdr.live_procs = 1;
	}
	pthread_mutex_unlock(&vgpu_rs.mu);
	return rc;
}

/* Gives the slot back on a normal exit so the exporter sees it at once. */
void vgpu_region_release_slot(void)
{
	struct vgpu_region *r = vgpu_rs.r;
	if (r == NULL)
		return;
	pthread_mutex_lock(&vgpu_rs.mu);
	if (vgpu_rs.slot >= 0 && vgpu_rs.shared && rg_region_lock(r) == LOCK_STUCK) {
		/* The others reclaim the slot as a dead process's once its lock is gone. */
		rg_slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)vgpu_rs.slot);
	} else if (vgpu_rs.slot >= 0 && vgpu_rs.shared) {
		if (still_mine(r)) {
			struct vgpu_region_header *h = &r->hdr;
			for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
				uint64_t total;
				if (rg_get_used(&h->mem_used[d], &h->mem_used_check[d], &total))
					rg_put_used(&h->mem_used[d], &h->mem_used_check[d],
						 total > vgpu_rs.mine[d] ? total - vgpu_rs.mine[d] : 0);
			}
			if (h->live_procs > 0)
				h->live_procs--;
			h->generation++;
		}
		struct vgpu_proc_slot *s = &r->slots[vgpu_rs.slot];
		__atomic_store_n(&s->status, VGPU_SLOT_TRANSIT, __ATOMIC_RELAXED);
		rg_zero(&s->pid, s + 1);
		rg_region_unlock(r);
		__atomic_store_n(&s->status, VGPU_SLOT_FREE, __ATOMIC_RELEASE);
		rg_slot_lock(F_OFD_SETLK, F_UNLCK, (uint32_t)vgpu_rs.slot);
	}
	__atomic_store_n(&vgpu_rs.slot, -1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vgpu_rs.mu);
}

void vgpu_region_after_fork(void)
{
	/* The child owns no slot and none of the parent's allocations. */
	pthread_mutex_init(&vgpu_rs.mu, NULL);
	__atomic_store_n(&vgpu_rs.slot, -1, __ATOMIC_RELEASE);
	vgpu_rs.epoch = 0;
#ifdef VGPU_TEST_HOOKS
	vgpu_rs.charges = 0;
#endif
	vgpu_rs.last_sweep_ns = 0;
	memset(vgpu_rs.mine, 0, sizeof(vgpu_rs.mine));
	memset(vgpu_rs.host, 0, sizeof(vgpu_rs.host));
	if (vgpu_rs.shared && vgpu_rs.fd >= 0) {
		/* It shares the parent's open file description, and so its slot lock. */
		close(vgpu_rs.fd);
		vgpu_rs.fd = -1;
	}
	if (vgpu_rs.r != NULL && !vgpu_rs.shared)
		format_region(vgpu_rs.r, false, true);
}

