/*
 * internal.h - state and helpers shared by libvgpu's hook families.
 *
 * Ownership and locking:
 *  - vgpu_cfg is written once by vgpu_init() (under pthread_once) and is
 *    read-only afterwards.
 *  - The shared region has its own locks (region.c); only region.c touches
 *    its memory.
 *  - The allocation ledger (ledger.c), the pool table (pool.c) and the
 *    context table (context.c) each have one process-local mutex; none of them
 *    is held while calling into the driver or while taking the region lock,
 *    except the ledger which only ever nests inside nothing.
 */
#ifndef VGPU_INTERNAL_H
#define VGPU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_api.h"
#include "nvml_api.h"
#include "vgpu_region.h"

#define VGPU_EXPORT __attribute__((visibility("default")))
/*
 * Code that can run inside a sanitizer runtime's own start-up (ASan and TSan
 * resolve their interceptors through dlsym before their shadow memory exists)
 * must not be instrumented. Only the dlsym path carries this attribute.
 */
#define VGPU_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#define VGPU_LIKELY(x) __builtin_expect(!!(x), 1)
#define VGPU_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum vgpu_policy {
	VGPU_POLICY_DEFAULT = 0,    /* limit unless the exporter flips util_switch */
	VGPU_POLICY_FORCE = 1,      /* always limit */
	VGPU_POLICY_DISABLE = 2,    /* never limit SMs */
};

#define VGPU_CVD_LEN 64

/* Parsed environment; immutable after vgpu_init(). */
struct vgpu_config {
	uint64_t mem_limit[VGPU_MAX_DEVICES];   /* bytes, 0 = none */
	uint32_t sm_limit[VGPU_MAX_DEVICES];    /* percent, 0 = none */
	int32_t priority;
	int policy;
	bool any_mem_limit;
	bool any_sm_limit;
	bool accounting;                        /* count allocations at all */
#ifdef VGPU_TEST_HOOKS
	uint32_t test_die_in_lock;              /* LIBVGPU_TEST_DIE_IN_LOCK (test build only) */
	uint32_t test_stop_in_lock;             /* LIBVGPU_TEST_STOP_IN_LOCK (test build only) */
#endif
	uint32_t lock_timeout_ms;               /* LIBVGPU_LOCK_TIMEOUT_MS, default 5000 */
	bool oversubscribe;                     /* CUDA_OVERSUBSCRIBE=true */
	char region_path[4096];                 /* "" = process-private region */
	int cvd_count;                          /* -1: CUDA_VISIBLE_DEVICES unset */
	char cvd[VGPU_MAX_DEVICES][VGPU_CVD_LEN];
};

extern struct vgpu_config vgpu_cfg;

/* init.c */
void vgpu_init(void);           /* once: symbols, environment, region attach */
void vgpu_register(void);       /* once per process image: slot + watcher thread */

/* env.c */
void vgpu_env_parse(struct vgpu_config *cfg);
int vgpu_parse_size(const char *text, uint64_t *bytes);

/* device.c: CUDA ordinal -> container device index (NVML index). */
int vgpu_dev_index(CUdevice dev);
int vgpu_current_dev(CUdevice *dev, int *idx);   /* 0 on success */
nvmlDevice_t vgpu_nvml_device(int idx);          /* NULL if NVML is unavailable */
int vgpu_nvml_count(void);                       /* devices NVML shows, 0 if unavailable */

/* region.c: every access to the region's memory goes through these. */
struct vgpu_region *vgpu_region(void);
bool vgpu_region_shared(void);     /* file-backed (else per process) */
int vgpu_region_attach(void);
int vgpu_region_claim_slot(void);   /* once per process image, any thread */
struct vgpu_proc_slot *vgpu_region_slot(void);
void vgpu_region_after_fork(void);
void vgpu_region_release_slot(void);
int vgpu_region_charge(int idx, uint64_t bytes, uint64_t limit);  /* 0 ok, -1 refused */
void vgpu_region_force(int idx, int64_t delta);
uint64_t vgpu_region_used(int idx);
void vgpu_region_watch(void);       /* watcher thread, every VGPU_WATCH_NS */
int vgpu_region_pids(unsigned int *pids, int max, unsigned int *self);
/* The container's live processes with what is counted for each on device idx. */
struct vgpu_rproc {
	int32_t hostpid;        /* 0: unknown */
	int32_t pid;            /* in the container's pid namespace */
	uint64_t mem;           /* bytes counted on device idx, UINT64_MAX if idx is invalid */
	uint32_t source;        /* how hostpid was learned (VGPU_HOSTPID_*) */
};
int vgpu_region_procs(int idx, struct vgpu_rproc *out, int max);
void vgpu_region_set_util(int idx, uint32_t mine, uint32_t total);
void vgpu_region_set_hostpid(int32_t pid, uint32_t source);
void vgpu_region_set_sm_mode(int idx, uint32_t mode);
void vgpu_region_host(int idx, int64_t delta);   /* host-backed bytes (host.c) */
#define VGPU_WATCH_NS (100 * 1000 * 1000ull)

/*
 * memory.c: charge with pool trimming on pressure. Requests above
 * VGPU_MAX_ALLOC (256 TiB, more than any device has) are refused whether or
 * not the device has a limit, before they reach the region's totals.
 */
#define VGPU_MAX_ALLOC (UINT64_C(1) << 48)
CUresult vgpu_charge(int idx, uint64_t bytes);
uint64_t vgpu_mul_sat(uint64_t a, uint64_t b);   /* a * b, UINT64_MAX on overflow */
void vgpu_uncharge(int idx, uint64_t bytes);
static inline bool vgpu_counting(void) { return vgpu_cfg.accounting; }

/* host.c: oversubscription from host memory. */
struct vgpu_resv;
CUresult vgpu_host_fallback(const struct vgpu_resv *rv, CUdeviceptr *dptr, size_t bytes);
/* cuMemAllocPitch_v2's fallback: chooses the pitch, settles the charge to pitch * height in rv. */
CUresult vgpu_host_fallback_pitch(struct vgpu_resv *rv, CUdeviceptr *dptr, size_t *pitch,
				  size_t width, size_t height);
bool vgpu_host_free(CUdeviceptr dptr, CUresult *res);   /* true if dptr was host memory */
/* The driver freed a context's host memory with it: uncharge it and stop publishing it. */
void vgpu_host_forget_owner(void *ctx);

/* ledger.c: process-local record of counted allocations. */
enum vgpu_kind {
	VGPU_K_DEVPTR = 1, VGPU_K_ARRAY, VGPU_K_MIPMAP,
	VGPU_K_VMM,         /* cuMemCreate physical memory, keyed by handle */
	VGPU_K_MAP,         /* a cuMemMap of a counted handle, keyed by address; owner = handle */
	VGPU_K_ASYNC,
	VGPU_K_HOST,        /* oversubscription: host memory serving a device allocation */
	VGPU_K_GRAPH,       /* a graph's allocation nodes on one device, keyed by vgpu_graph_key */
};
/* vgpu_entry.flags */
#define VGPU_F_EXPORTED 1u  /* handed to other processes (IPC handle, shareable handle): share.c */
struct vgpu_entry {
	uint64_t key;
	uint64_t bytes;
	void *owner;        /* CUcontext for context-bound kinds, CUmemoryPool for async */
	int32_t idx;
	uint16_t kind;
	uint16_t flags;     /* VGPU_F_* */
	uint32_t refs;      /* VMM: handle references (cuMemCreate, cuMemRetainAllocationHandle) */
	uint32_t maps;      /* VMM: live cuMemMap mappings */
	uint64_t aux;       /* K_HOST: the host pointer */
};
void vgpu_ledger_add(const struct vgpu_entry *e);
bool vgpu_ledger_take(int kind, uint64_t key, struct vgpu_entry *out);
/* Takes one entry of `kind` whose key lies in [lo, hi); false when none is left. */
bool vgpu_ledger_take_in(int kind, uint64_t lo, uint64_t hi, struct vgpu_entry *out);
/* Takes one entry of `kind` owned by `owner`; false when none is left. */
bool vgpu_ledger_take_owned(int kind, void *owner, struct vgpu_entry *out);
/*
 * Adds drefs/dmaps to a VMM handle's references and mappings. Returns -1 if
 * the handle is not counted (or has no reference to drop), 1 when nothing
 * holds the memory any more (the entry is removed; *out is its last state),
 * else 0 (*out is its new state).
 */
int vgpu_ledger_vmm_adjust(uint64_t handle, int drefs, int dmaps, struct vgpu_entry *out);
/* Sets `flags` on the entry (kind, key); false when there is none. */
bool vgpu_ledger_set_flags(int kind, uint64_t key, uint16_t flags);
uint64_t vgpu_ledger_purge_owner(void *owner, int idx_out[VGPU_MAX_DEVICES],
				 uint64_t bytes_out[VGPU_MAX_DEVICES]);
void vgpu_ledger_reset(void);

/*
 * share.c: memory other processes may map. Called instead of uncharging when
 * the allocating process lets go of an exported allocation: the charge stays.
 */
void vgpu_share_linger(const struct vgpu_entry *e);

/* graph.c: whether the stream is capturing a graph (its allocations are graph nodes). */
bool vgpu_stream_capturing(CUstream stream, bool ptsz);

/* memory.c: the total a container with a limit on device idx is shown, given the card's. */
uint64_t vgpu_shown_total(int idx, uint64_t card_total);

/* pool.c */
void vgpu_pool_trim_device(int idx);
void vgpu_pool_sync_device(int idx);
/* cuMemFree_v2 of a stream-ordered allocation: frees and settles it (pool.c); false if it is none. */
bool vgpu_pool_free_plain(CUdeviceptr dptr, CUresult *res);
void vgpu_pool_reset(void);

/* context.c */
void vgpu_context_reset(void);

/* hostpid.c: this process's pid as NVML knows it. */
#define VGPU_PLIST_MAX 64
struct vgpu_plist {
	unsigned int n;
	unsigned int pid[VGPU_PLIST_MAX];
	unsigned long long mem[VGPU_PLIST_MAX];
};
int32_t vgpu_hostpid(void);                     /* 0 until learned */
uint32_t vgpu_hostpid_source(void);             /* VGPU_HOSTPID_* */
bool vgpu_hostpid_wanted(void);                 /* not learned from NVML yet */
int vgpu_proc_list(int idx, struct vgpu_plist *out);   /* -1: NVML cannot list */
int vgpu_plist_find(const struct vgpu_plist *l, unsigned int pid);   /* index or -1 */
/* Indexes in `after` of the pids `before` lacks (processes whose first context appeared). */
unsigned int vgpu_plist_new(const struct vgpu_plist *before, const struct vgpu_plist *after,
			    unsigned int *idx);
void vgpu_hostpid_discover(int idx, const struct vgpu_plist *before,
			   const struct vgpu_plist *after, CUcontext ctx);
void vgpu_hostpid_fallback(void);               /* NSpid, unverified, if nothing better */
void vgpu_hostpid_after_fork(void);

/* limiter.c */
extern int vgpu_limiter_enabled;    /* read on every launch */
extern int vgpu_watcher_running;    /* set by the watcher thread once it runs */
void vgpu_limiter_setup(void);
/* dev and idx: the launch device and its index, resolved once by launch.c for both gates. */
void vgpu_limiter_gate(CUdevice dev, int idx, uint64_t blocks);
void vgpu_limiter_tick(void);
void vgpu_limiter_after_fork(void);

/* priority.c: CUDA_TASK_PRIORITY, a low-priority launch yields to a high one. */
extern int vgpu_prio_enabled;       /* read on every launch */
void vgpu_prio_setup(void);
void vgpu_prio_gate(int idx);

/* Monotonic and wall clocks in nanoseconds. */
uint64_t vgpu_now_ns(void);
uint64_t vgpu_wall_ns(void);

#endif /* VGPU_INTERNAL_H */
