/*
 * region.c - the container's shared region: creation, validation, process
 * slots and the per-device usage counters that enforce the memory limit.
 *
 * Concurrency design:
 *  - Creation and validation happen under flock(2) on the file, which the
 *    kernel drops if the holder dies, so a crash mid-initialisation only
 *    leaves a file the next process re-initialises.
 *  - Slots and the mem_used totals change under one robust, process-shared
 *    mutex in the header. If its owner dies, the next locker gets EOWNERDEAD
 *    and rebuilds the totals from the slots, which are the source of truth.
 *  - Each slot carries a second robust mutex that the owning process's
 *    watcher thread holds for the life of the process. A process killed at
 *    any point (even SIGKILL) leaves that mutex "owner died", which is how
 *    other processes tell dead slots from live ones without trusting pids
 *    (which get reused and differ across pid namespaces).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "symbols.h"

static struct vgpu_region *g_region;
static bool g_shared;
static struct vgpu_proc_slot *g_slot;
/* Usage of a process that could not get a slot (table full): counted locally. */
static uint64_t g_orphan[VGPU_MAX_DEVICES];

struct vgpu_region *vgpu_region(void) { return g_region; }
struct vgpu_proc_slot *vgpu_region_slot(void) { return __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE); }

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

static int init_lock(pthread_mutex_t *m)
{
	pthread_mutexattr_t attr;
	int rc = pthread_mutexattr_init(&attr);
	if (rc == 0)
		rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	if (rc == 0)
		rc = pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
	return rc;
}

/*
 * Records each limited device's NVML UUID, so the node agent's exporter can
 * label a container's usage with the card it runs on. Without NVML the UUIDs
 * stay empty and the exporter falls back to the allocation it handed out.
 */
static void fill_uuids(struct vgpu_region_header *h)
{
	for (uint32_t i = 0; i < h->device_count; i++) {
		/* vgpu_nvml_device loads NVML on first use; look it up after. */
		nvmlDevice_t d = vgpu_nvml_device((int)i);
		if (d == NULL || REAL(nvmlDeviceGetUUID) == NULL ||
		    REAL(nvmlDeviceGetUUID)(d, h->uuid[i], VGPU_UUID_BYTES) != NVML_SUCCESS)
			h->uuid[i][0] = '\0';
		h->uuid[i][VGPU_UUID_BYTES - 1] = '\0';
	}
}

/* Writes a fresh header and empty slots; the magic number goes in last. */
static void region_format(struct vgpu_region *r)
{
	struct vgpu_region_header *h = &r->hdr;
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELEASE);
	memset(r, 0, sizeof(*r));
	h->version = VGPU_REGION_VERSION;
	h->header_size = VGPU_HEADER_SIZE;
	h->slot_size = VGPU_SLOT_SIZE;
	h->max_procs = VGPU_MAX_PROCS;
	h->max_devices = VGPU_MAX_DEVICES;
	h->total_size = VGPU_REGION_SIZE;
	h->created_unix_ns = vgpu_wall_ns();
	h->priority = vgpu_cfg.priority;
	read_boot_id(h->boot_id);
	for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
		h->mem_limit[i] = vgpu_cfg.mem_limit[i];
		h->sm_limit[i] = vgpu_cfg.sm_limit[i];
		if (h->mem_limit[i] != 0 || h->sm_limit[i] != 0)
			h->device_count = (uint32_t)i + 1;
	}
	fill_uuids(h);
	init_lock(&h->lock.mutex);
	for (int i = 0; i < VGPU_MAX_PROCS; i++)
		init_lock(&r->slots[i].alive.mutex);
	__atomic_store_n(&h->magic, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
}

/* Returns NULL if the mapped file is a usable region, else why not. */
static const char *region_invalid(const struct vgpu_region *r)
{
	const struct vgpu_region_header *h = &r->hdr;
	char boot[VGPU_BOOT_ID_BYTES];

	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC)
		return "has no valid magic number";
	if (h->version != VGPU_REGION_VERSION)
		return "has another layout version";
	if (h->header_size != VGPU_HEADER_SIZE || h->slot_size != VGPU_SLOT_SIZE ||
	    h->max_procs != VGPU_MAX_PROCS || h->max_devices != VGPU_MAX_DEVICES ||
	    h->total_size != VGPU_REGION_SIZE)
		return "has inconsistent sizes";
	read_boot_id(boot);
	/* Locks held before a reboot would look taken forever. */
	if (boot[0] != '\0' && strncmp(boot, h->boot_id, sizeof(boot)) != 0)
		return "was written before the last reboot";
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (h->mem_used[i] > (UINT64_C(1) << 52))
			return "holds impossible usage counters";
	if (h->slot_hwm > VGPU_MAX_PROCS)
		return "holds an impossible slot count";
	return NULL;
}

static int attach_shared(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	struct stat st;
	void *map = MAP_FAILED;

	if (fd < 0) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot open shared region %s: %s", path, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			VGPU_LOG(VGPU_LOG_WARN, "cannot lock shared region %s: %s", path,
				 strerror(errno));
			close(fd);
			return -1;
		}
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		VGPU_LOG(VGPU_LOG_WARN, "shared region %s is not a regular file", path);
		goto fail;
	}
	/*
	 * A short file is a crash or a copy gone wrong: its locks were never
	 * initialised as robust, so it must be formatted rather than trusted.
	 */
	bool truncated = st.st_size != 0 && st.st_size < (off_t)VGPU_REGION_SIZE;
	/* Only ever grow the file: another process may have it mapped. */
	if (st.st_size < (off_t)VGPU_REGION_SIZE && ftruncate(fd, VGPU_REGION_SIZE) != 0) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot size shared region %s: %s", path, strerror(errno));
		goto fail;
	}
	map = mmap(NULL, VGPU_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		VGPU_LOG(VGPU_LOG_WARN, "cannot map shared region %s: %s", path, strerror(errno));
		goto fail;
	}
	struct vgpu_region *r = map;
	const char *why = truncated ? "is truncated" : region_invalid(r);
	if (why != NULL) {
		if (st.st_size != 0)
			VGPU_LOG(VGPU_LOG_WARN, "shared region %s %s; re-initialising it", path, why);
		region_format(r);
		if (fchmod(fd, 0666) != 0)
			VGPU_LOG(VGPU_LOG_DEBUG, "fchmod %s: %s", path, strerror(errno));
	}
	flock(fd, LOCK_UN);
	close(fd);
	g_region = r;
	g_shared = true;
	VGPU_LOG(VGPU_LOG_DEBUG, "attached shared region %s", path);
	return 0;
fail:
	flock(fd, LOCK_UN);
	close(fd);
	return -1;
}

int vgpu_region_attach(void)
{
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
	region_format(map);
	g_region = map;
	g_shared = false;
	return 0;
}

/* Rebuilds derived totals from the slots after a lock owner died mid-update. */
static void region_repair(struct vgpu_region *r)
{
	uint64_t used[VGPU_MAX_DEVICES] = {0};
	uint32_t live = 0;
	for (uint32_t i = 0; i < r->hdr.slot_hwm && i < VGPU_MAX_PROCS; i++) {
		const struct vgpu_proc_slot *s = &r->slots[i];
		if (s->status != VGPU_SLOT_ACTIVE)
			continue;
		live++;
		for (int d = 0; d < VGPU_MAX_DEVICES; d++)
			used[d] += s->mem_used[d];
	}
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		__atomic_store_n(&r->hdr.mem_used[d], used[d], __ATOMIC_RELAXED);
	r->hdr.live_procs = live;
}

static int region_lock(struct vgpu_region *r)
{
	int rc = pthread_mutex_lock(&r->hdr.lock.mutex);
	if (rc == EOWNERDEAD) {
		VGPU_LOG(VGPU_LOG_WARN, "a process died holding the region lock; repairing totals");
		region_repair(r);
		pthread_mutex_consistent(&r->hdr.lock.mutex);
		return 0;
	}
	if (rc != 0) {
		VGPU_LOG(VGPU_LOG_ERROR, "region lock failed: %s", strerror(rc));
		return -1;
	}
	return 0;
}

static void region_unlock(struct vgpu_region *r) { pthread_mutex_unlock(&r->hdr.lock.mutex); }

static void slot_release_locked(struct vgpu_region *r, struct vgpu_proc_slot *s)
{
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		uint64_t total = r->hdr.mem_used[d];
		uint64_t mine = s->mem_used[d];
		__atomic_store_n(&r->hdr.mem_used[d], total > mine ? total - mine : 0,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&s->mem_used[d], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->sm_util[d], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&s->status, VGPU_SLOT_FREE, __ATOMIC_RELEASE);
	if (r->hdr.live_procs > 0)
		r->hdr.live_procs--;
	r->hdr.generation++;
}

/* Frees slots whose owner is gone. Caller holds the region lock. */
static int reclaim_locked(struct vgpu_region *r)
{
	int reclaimed = 0;
	if (!g_shared)
		return 0;
	for (uint32_t i = 0; i < r->hdr.slot_hwm && i < VGPU_MAX_PROCS; i++) {
		struct vgpu_proc_slot *s = &r->slots[i];
		if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) != VGPU_SLOT_ACTIVE)
			continue;
		int rc = pthread_mutex_trylock(&s->alive.mutex);
		if (rc == EBUSY)
			continue;   /* owner alive */
		if (rc == EOWNERDEAD)
			pthread_mutex_consistent(&s->alive.mutex);
		else if (rc != 0)
			init_lock(&s->alive.mutex);     /* unrecoverable: start over */
		VGPU_LOG(VGPU_LOG_INFO, "reclaimed slot %u of dead pid %d", i, s->pid);
		slot_release_locked(r, s);
		if (rc == 0 || rc == EOWNERDEAD)
			pthread_mutex_unlock(&s->alive.mutex);
		reclaimed++;
	}
	return reclaimed;
}

int vgpu_region_reclaim_dead(void)
{
	struct vgpu_region *r = g_region;
	if (r == NULL || region_lock(r) != 0)
		return 0;
	int n = reclaim_locked(r);
	region_unlock(r);
	return n;
}

/* The pid NVML reports: the outermost pid namespace visible in NSpid. */
static int32_t host_pid(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int32_t pid = (int32_t)getpid();
	if (f == NULL)
		return pid;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			long v = strtol(line + 6, NULL, 10);
			if (v > 0)
				pid = (int32_t)v;
			break;
		}
	}
	fclose(f);
	return pid;
}

/* Takes slot i if its liveness lock can be acquired. Caller holds the region lock. */
static int try_take_locked(struct vgpu_region *r, uint32_t i)
{
	struct vgpu_proc_slot *s = &r->slots[i];
	if (g_shared) {
		int rc = pthread_mutex_trylock(&s->alive.mutex);
		if (rc == EOWNERDEAD)
			pthread_mutex_consistent(&s->alive.mutex);
		else if (rc != 0)
			return -1;  /* an exiting process still holds it */
	}
	memset(s->mem_used, 0, sizeof(s->mem_used));
	memset(s->sm_util, 0, sizeof(s->sm_util));
	s->pid = (int32_t)getpid();
	s->hostpid = host_pid();
	s->priority = vgpu_cfg.priority;
	s->start_unix_ns = vgpu_wall_ns();
	__atomic_store_n(&s->status, VGPU_SLOT_ACTIVE, __ATOMIC_RELEASE);
	if (i + 1 > r->hdr.slot_hwm)
		__atomic_store_n(&r->hdr.slot_hwm, i + 1, __ATOMIC_RELEASE);
	r->hdr.live_procs++;
	r->hdr.generation++;
	__atomic_store_n(&g_slot, s, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Claims a slot for this process. In a shared region the calling thread
 * becomes the slot's liveness-lock owner, so it must live as long as the
 * process (the watcher thread does).
 */
int vgpu_region_claim_slot(void)
{
	struct vgpu_region *r = g_region;
	if (r == NULL || region_lock(r) != 0)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < VGPU_MAX_PROCS; i++) {
			if (__atomic_load_n(&r->slots[i].status, __ATOMIC_ACQUIRE) != VGPU_SLOT_FREE)
				continue;
			if (try_take_locked(r, i) == 0) {
				region_unlock(r);
				return 0;
			}
		}
		if (reclaim_locked(r) == 0)
			break;
	}
	region_unlock(r);
	VGPU_LOG(VGPU_LOG_ERROR, "all %d region slots are in use; counting this process locally",
		 VGPU_MAX_PROCS);
	return -1;
}

/* Gives the slot back on a normal exit so the exporter sees it at once. */
void vgpu_region_release_slot(void)
{
	struct vgpu_region *r = g_region;
	struct vgpu_proc_slot *s = __atomic_exchange_n(&g_slot, NULL, __ATOMIC_ACQ_REL);
	if (r == NULL || s == NULL || region_lock(r) != 0)
		return;
	if (s->pid == (int32_t)getpid() && s->status == VGPU_SLOT_ACTIVE)
		slot_release_locked(r, s);
	region_unlock(r);
}

void vgpu_region_after_fork(void)
{
	/* The child owns no slot and none of the parent's allocations. */
	__atomic_store_n(&g_slot, NULL, __ATOMIC_RELEASE);
	memset(g_orphan, 0, sizeof(g_orphan));
	if (g_region != NULL && !g_shared)
		region_format(g_region);
}

int vgpu_region_charge(int idx, uint64_t bytes, uint64_t limit)
{
	struct vgpu_region *r = g_region;
	struct vgpu_proc_slot *s = vgpu_region_slot();

	if (r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	if (region_lock(r) != 0)
		return 0;   /* never block the application on a broken lock */
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t used = r->hdr.mem_used[idx] + g_orphan[idx];
		if (limit == 0 || (used <= limit && bytes <= limit - used)) {
			if (s != NULL) {
				__atomic_store_n(&r->hdr.mem_used[idx], r->hdr.mem_used[idx] + bytes,
						 __ATOMIC_RELAXED);
				__atomic_store_n(&s->mem_used[idx], s->mem_used[idx] + bytes,
						 __ATOMIC_RELAXED);
			} else {
				g_orphan[idx] += bytes;
			}
			region_unlock(r);
			return 0;
		}
		/* Over the limit: dead processes may still hold usage. */
		if (attempt == 0 && reclaim_locked(r) == 0)
			break;
	}
	region_unlock(r);
	return -1;
}

void vgpu_region_force(int idx, int64_t delta)
{
	struct vgpu_region *r = g_region;
	struct vgpu_proc_slot *s = vgpu_region_slot();
	if (r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES || delta == 0)
		return;
	if (region_lock(r) != 0)
		return;
	uint64_t *total = s != NULL ? &r->hdr.mem_used[idx] : &g_orphan[idx];
	if (delta < 0) {
		uint64_t d = (uint64_t)(-delta);
		uint64_t mine = s != NULL ? s->mem_used[idx] : d;
		if (d > mine)
			d = mine;   /* never give back more than this process holds */
		__atomic_store_n(total, *total > d ? *total - d : 0, __ATOMIC_RELAXED);
		if (s != NULL)
			__atomic_store_n(&s->mem_used[idx], mine - d, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(total, *total + (uint64_t)delta, __ATOMIC_RELAXED);
		if (s != NULL)
			__atomic_store_n(&s->mem_used[idx], s->mem_used[idx] + (uint64_t)delta,
					 __ATOMIC_RELAXED);
	}
	region_unlock(r);
}

uint64_t vgpu_region_used(int idx)
{
	struct vgpu_region *r = g_region;
	if (r == NULL || idx < 0 || idx >= VGPU_MAX_DEVICES)
		return 0;
	return __atomic_load_n(&r->hdr.mem_used[idx], __ATOMIC_RELAXED) +
	       __atomic_load_n(&g_orphan[idx], __ATOMIC_RELAXED);
}
