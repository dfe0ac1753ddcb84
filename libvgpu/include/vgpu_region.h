/*
 * vgpu_region.h - layout of the shared region file of one container.
 *
 * Every process of a GPU container maps the file named by
 * CUDA_DEVICE_MEMORY_SHARED_CACHE. libvgpu writes it; the node agent's
 * exporter (Go) reads it and may write the util_switch[] words. This header is
 * the single definition of the layout; REGION.md repeats it for readers that
 * do not read C. All integers are little-endian, naturally aligned, and
 * accessed with 32/64-bit atomic loads and stores, so a reader never needs the
 * lock to get a consistent single value.
 *
 * Layout (byte offsets from the start of the file):
 *   0       struct vgpu_region_header   (4096 bytes)
 *   4096    struct vgpu_proc_slot[VGPU_MAX_PROCS]   (512 bytes each)
 *   total   VGPU_REGION_SIZE = 4096 + 1024 * 512 = 528384 bytes
 *
 * Compatibility rule: a reader must check magic and version and refuse the
 * file when either differs. A field added in space that was reserved (and so
 * zero in files of older writers, where zero means "unknown") keeps the
 * version: older readers ignore it. Any other layout change increments
 * VGPU_REGION_VERSION. A writer that finds another version re-initialises the
 * file in place.
 *
 * Writers (libvgpu) also rely on kernel locks on the file itself, which no
 * write to the file can damage: flock(2) serialises formatting and
 * registration, and the process owning slot i holds an open-file-description
 * lock (F_OFD_SETLK) on the slot's first byte for its lifetime. The kernel
 * drops both when the process dies, however it dies. See region.c.
 */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stddef.h>
#include <stdint.h>

/* "VGPU-REG" read as a little-endian uint64. */
#define VGPU_REGION_MAGIC UINT64_C(0x4745522d55504756)
#define VGPU_REGION_VERSION 1u

#define VGPU_MAX_DEVICES 16     /* per-device arrays are indexed by container device index */
#define VGPU_MAX_PROCS 1024     /* process slots */
#define VGPU_LOCK_BYTES 64      /* room reserved for the region lock */
#define VGPU_UUID_BYTES 64
#define VGPU_BOOT_ID_BYTES 40

#define VGPU_HEADER_SIZE 4096u
#define VGPU_SLOT_SIZE 512u
#define VGPU_REGION_SIZE (VGPU_HEADER_SIZE + VGPU_MAX_PROCS * VGPU_SLOT_SIZE)

/* vgpu_region_header.flags */
#define VGPU_REGION_RECOVERING 1u   /* rebuilt under live processes: charges wait until they re-register */

/*
 * Integrity check of every usage counter: mem_used_check[i] == mem_used[i] ^
 * VGPU_CHECK_KEY, so zeroed or scribbled counters are told from real ones.
 */
#define VGPU_CHECK_KEY UINT64_C(0x9e3779b97f4a7c15)

/* vgpu_proc_slot.status */
#define VGPU_SLOT_FREE 0u
#define VGPU_SLOT_ACTIVE 1u
#define VGPU_SLOT_TRANSIT 2u    /* being claimed or released: not live, counts nothing */

/* vgpu_proc_slot.hostpid_source: how hostpid was learned. */
#define VGPU_HOSTPID_UNKNOWN 0u     /* hostpid is 0 */
#define VGPU_HOSTPID_NVML 1u        /* the one new process in NVML's list across context creation */
#define VGPU_HOSTPID_MARKER 2u      /* several were new; a marker allocation singled it out */
#define VGPU_HOSTPID_NSPID 3u       /* NVML could not tell: outermost NSpid entry, unverified */
#define VGPU_HOSTPID_AGENT 4u       /* written by the node agent */

/* vgpu_region_header.sm_mode[]: how the SM limit of a device is enforced. */
#define VGPU_SM_MODE_NONE 0u        /* no SM limit, or not started yet */
#define VGPU_SM_MODE_PROCESS 1u     /* NVML per-process utilisation of the container's host pids */
#define VGPU_SM_MODE_DEVICE 2u      /* device-wide utilisation: never above the share, may be below */
#define VGPU_SM_MODE_OFF 3u         /* a limit is set but NVML reports no utilisation (MIG): not enforced */

/* CUDA_TASK_PRIORITY values (HAMi's nvidia.com/priority): 0 high, 1 low (the default). */
#define VGPU_PRIO_HIGH 0
#define VGPU_PRIO_LOW 1
#define VGPU_PRIO_LEVELS 2

/* vgpu_region_header.util_switch[] (written by the exporter). */
#define VGPU_UTIL_SWITCH_LIMIT 0u   /* enforce CUDA_DEVICE_SM_LIMIT (initial value) */
#define VGPU_UTIL_SWITCH_FREE 1u    /* container is alone on the GPU: do not throttle */

/*
 * The region lock: a 32-bit futex word holding the lock owner's slot index + 1
 * (0 = free, bit 31 = waiters). An owner's death is detected through its
 * slot's file lock (region.c). Opaque to readers.
 */
union vgpu_lock {
	uint32_t word;
	uint8_t bytes[VGPU_LOCK_BYTES];
};

struct vgpu_region_header {
	uint64_t magic;                 /*    0  VGPU_REGION_MAGIC, written last at creation */
	uint32_t version;               /*    8  VGPU_REGION_VERSION */
	uint32_t header_size;           /*   12  VGPU_HEADER_SIZE */
	uint32_t slot_size;             /*   16  VGPU_SLOT_SIZE */
	uint32_t max_procs;             /*   20  VGPU_MAX_PROCS */
	uint32_t max_devices;           /*   24  VGPU_MAX_DEVICES */
	uint32_t device_count;          /*   28  1 + highest device index with a limit (0: none) */
	uint64_t total_size;            /*   32  VGPU_REGION_SIZE, bytes */
	uint64_t created_unix_ns;       /*   40  CLOCK_REALTIME at creation, ns */
	char boot_id[VGPU_BOOT_ID_BYTES]; /* 48  /proc/sys/kernel/random/boot_id at creation */
	uint32_t slot_hwm;              /*   88  one past the highest slot index ever claimed */
	uint32_t live_procs;            /*   92  slots currently ACTIVE */
	uint64_t generation;            /*   96  incremented on every slot claim and release */
	int32_t priority;               /*  104  CUDA_TASK_PRIORITY of the creating process */
	uint32_t flags;                 /*  108  VGPU_REGION_RECOVERING */
	uint64_t epoch;                 /*  112  changes every time the region is formatted */
	uint8_t pad0[8];                /*  120 */
	union vgpu_lock lock;           /*  128  region lock guarding slots and mem_used */
	uint64_t mem_limit[VGPU_MAX_DEVICES];  /* 192  bytes, 0 = no limit (creator's environment) */
	uint64_t mem_used[VGPU_MAX_DEVICES];   /* 320  bytes, sum of ACTIVE slots' mem_used */
	uint32_t sm_limit[VGPU_MAX_DEVICES];   /* 448  percent of SMs, 0 = no limit */
	uint32_t util_switch[VGPU_MAX_DEVICES];/* 512  VGPU_UTIL_SWITCH_*, written by the exporter */
	uint32_t sm_util[VGPU_MAX_DEVICES];    /* 576  container SM utilisation, percent, last sample */
	uint64_t mem_used_check[VGPU_MAX_DEVICES]; /* 640  mem_used[i] ^ VGPU_CHECK_KEY */
	char uuid[VGPU_MAX_DEVICES][VGPU_UUID_BYTES]; /* 768  NVML UUID per device, "" if unknown */
	uint32_t sm_mode[VGPU_MAX_DEVICES];    /* 1792 VGPU_SM_MODE_* */
	uint32_t host_mib[VGPU_MAX_DEVICES];   /* 1856 MiB served from host memory (oversubscription) */
	/*
	 * Task priority (CUDA_TASK_PRIORITY, priority.c): CLOCK_MONOTONIC_COARSE ns of
	 * the latest kernel launch on device d by a process of this container at
	 * priority p (0 high, 1 low), 0 = none yet.
	 */
	uint64_t prio_launch_ns[VGPU_PRIO_LEVELS][VGPU_MAX_DEVICES]; /* 1920 */
	/*
	 * Written by the node agent: the latest prio_launch_ns[0] of any other
	 * container on the same card (CLOCK_MONOTONIC_COARSE is node-wide), 0 = none.
	 */
	uint64_t peer_high_ns[VGPU_MAX_DEVICES];      /* 2176 */
	uint8_t reserved[VGPU_HEADER_SIZE - 2304];    /* 2304 zero */
};

struct vgpu_proc_slot {
	uint8_t pad_lock[64];           /*    0  zero; the owner holds a file lock on byte 0 of the slot */
	uint32_t status;                /*   64  VGPU_SLOT_FREE / VGPU_SLOT_ACTIVE */
	int32_t pid;                    /*   68  pid in the container's pid namespace */
	int32_t hostpid;                /*   72  pid as NVML reports it (0 = unknown; the agent may set it) */
	int32_t priority;               /*   76  CUDA_TASK_PRIORITY */
	uint64_t start_unix_ns;         /*   80  CLOCK_REALTIME when the slot was claimed, ns */
	uint64_t epoch;                 /*   88  header epoch the process registered under */
	uint32_t hostpid_source;        /*   96  VGPU_HOSTPID_* */
	uint8_t pad0[28];               /*  100 */
	uint64_t mem_used[VGPU_MAX_DEVICES];  /* 128  bytes counted for this process per device */
	uint32_t sm_util[VGPU_MAX_DEVICES];   /* 256  this process's SM utilisation, percent */
	uint64_t mem_used_check[VGPU_MAX_DEVICES]; /* 320  mem_used[i] ^ VGPU_CHECK_KEY */
	uint32_t host_mib[VGPU_MAX_DEVICES];  /* 448  of mem_used, MiB in host memory (rounded up) */
};

struct vgpu_region {
	struct vgpu_region_header hdr;
	struct vgpu_proc_slot slots[VGPU_MAX_PROCS];
};

_Static_assert(sizeof(union vgpu_lock) == VGPU_LOCK_BYTES, "lock size");
_Static_assert(offsetof(struct vgpu_region_header, version) == 8, "header.version");
_Static_assert(offsetof(struct vgpu_region_header, total_size) == 32, "header.total_size");
_Static_assert(offsetof(struct vgpu_region_header, boot_id) == 48, "header.boot_id");
_Static_assert(offsetof(struct vgpu_region_header, slot_hwm) == 88, "header.slot_hwm");
_Static_assert(offsetof(struct vgpu_region_header, generation) == 96, "header.generation");
_Static_assert(offsetof(struct vgpu_region_header, priority) == 104, "header.priority");
_Static_assert(offsetof(struct vgpu_region_header, flags) == 108, "header.flags");
_Static_assert(offsetof(struct vgpu_region_header, epoch) == 112, "header.epoch");
_Static_assert(offsetof(struct vgpu_region_header, lock) == 128, "header.lock");
_Static_assert(offsetof(struct vgpu_region_header, mem_limit) == 192, "header.mem_limit");
_Static_assert(offsetof(struct vgpu_region_header, mem_used) == 320, "header.mem_used");
_Static_assert(offsetof(struct vgpu_region_header, sm_limit) == 448, "header.sm_limit");
_Static_assert(offsetof(struct vgpu_region_header, util_switch) == 512, "header.util_switch");
_Static_assert(offsetof(struct vgpu_region_header, sm_util) == 576, "header.sm_util");
_Static_assert(offsetof(struct vgpu_region_header, mem_used_check) == 640, "header.mem_used_check");
_Static_assert(offsetof(struct vgpu_region_header, uuid) == 768, "header.uuid");
_Static_assert(offsetof(struct vgpu_region_header, sm_mode) == 1792, "header.sm_mode");
_Static_assert(offsetof(struct vgpu_region_header, host_mib) == 1856, "header.host_mib");
_Static_assert(offsetof(struct vgpu_region_header, prio_launch_ns) == 1920, "header.prio_launch_ns");
_Static_assert(offsetof(struct vgpu_region_header, peer_high_ns) == 2176, "header.peer_high_ns");
_Static_assert(sizeof(struct vgpu_region_header) == VGPU_HEADER_SIZE, "header size");
_Static_assert(offsetof(struct vgpu_proc_slot, status) == 64, "slot.status");
_Static_assert(offsetof(struct vgpu_proc_slot, hostpid) == 72, "slot.hostpid");
_Static_assert(offsetof(struct vgpu_proc_slot, start_unix_ns) == 80, "slot.start_unix_ns");
_Static_assert(offsetof(struct vgpu_proc_slot, epoch) == 88, "slot.epoch");
_Static_assert(offsetof(struct vgpu_proc_slot, hostpid_source) == 96, "slot.hostpid_source");
_Static_assert(offsetof(struct vgpu_proc_slot, mem_used) == 128, "slot.mem_used");
_Static_assert(offsetof(struct vgpu_proc_slot, sm_util) == 256, "slot.sm_util");
_Static_assert(offsetof(struct vgpu_proc_slot, mem_used_check) == 320, "slot.mem_used_check");
_Static_assert(offsetof(struct vgpu_proc_slot, host_mib) == 448, "slot.host_mib");
_Static_assert(sizeof(struct vgpu_proc_slot) == VGPU_SLOT_SIZE, "slot size");
_Static_assert(offsetof(struct vgpu_region, slots) == VGPU_HEADER_SIZE, "slots offset");
_Static_assert(sizeof(struct vgpu_region) == VGPU_REGION_SIZE, "region size");

#endif /* VGPU_REGION_H */
