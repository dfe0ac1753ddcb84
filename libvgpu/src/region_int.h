/*
 * region_int.h - what the shared region's files (region.c: format,
 * validation, repair, attach and claim; region_lock.c: the kernel's file
 * locks and the region lock; region_usage.c: charges and what is published)
 * share. Nothing outside them includes it.
 */
#ifndef VGPU_REGION_INT_H
#define VGPU_REGION_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

#define LOCK_WAITERS 0x80000000u
#define LOCK_OWNER_MASK 0x7ffu          /* slot index + 1 */
#define LOCK_SEQ_SHIFT 11               /* bits 11..30: per-acquisition sequence */
#define LOCK_SEQ_MASK 0xfffffu
#define LOCK_POLL_NS (10 * 1000 * 1000) /* a waiter checks the owner this often */
#define SWEEP_NS (1000 * 1000 * 1000ull)        /* watcher's reclaim of dead slots */
#define RECOVERY_WAIT_NS (10 * 1000 * 1000 * 1000ull)

/*
 * This process's view of the region. Everything is guarded by `mu` except
 * `slot`, which the limiter reads without it (atomically). vgpu_region_attach
 * runs once, before any other function here.
 */
struct region_state {
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
#ifdef VGPU_TEST_HOOKS
	uint32_t charges;               /* for LIBVGPU_TEST_DIE_IN_LOCK / _STOP_IN_LOCK */
#endif
	bool claim_retry;               /* the claim gave up on a stuck lock: try again */
	int32_t hostpid;
	uint32_t hostpid_source;
	char boot_id[VGPU_BOOT_ID_BYTES];
	char uuid[VGPU_MAX_DEVICES][VGPU_UUID_BYTES];
	int ndev;                       /* NVML's device count in the container, 0 if unknown */
};

extern struct region_state vgpu_rs;

/* region.c */
void rg_put_used(uint64_t *val, uint64_t *chk, uint64_t v);
bool rg_get_used(const uint64_t *val, const uint64_t *chk, uint64_t *out);
bool rg_used_ok(const uint64_t *val, const uint64_t *chk);
uint32_t rg_host_mib(uint64_t bytes);
void rg_zero(void *from, void *to);
int rg_rebuild_locked(struct vgpu_region *r);
int rg_enter(void);
void rg_leave(void);

/* region_lock.c */
enum { LOCK_STUCK = -1, LOCKED = 0, LOCKED_FROM_DEAD = 1 };
off_t rg_slot_byte(uint32_t i);
int rg_flock_ex(int fd);
int rg_slot_lock(int cmd, short type, uint32_t i);
int rg_scan_held(bool held[VGPU_MAX_PROCS]);
bool rg_other_users(void);
int rg_region_lock(struct vgpu_region *r);
void rg_region_unlock(struct vgpu_region *r);

#endif /* VGPU_REGION_INT_H */
