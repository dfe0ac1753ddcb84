/*
 * stub.h - shared definitions of the fake CUDA driver and NVML used by the
 * test suite and the benchmark. The stubs simulate devices with memory
 * accounting and kernels that keep a device busy for time proportional to
 * grid size / SM count, and record what reached them.
 *
 * Environment (read once at load):
 *   VGPU_STUB_STATE     file shared by all processes (default: per process)
 *   VGPU_STUB_DEVICES   device count (default 3)
 *   VGPU_STUB_MEM       bytes per device (default 16 GiB)
 *   VGPU_STUB_SM        SMs per device (default 16)
 *   VGPU_STUB_WAVE_NS   time one full wave of blocks occupies a device (default 250 us)
 *   VGPU_STUB_MAX_QUEUE_NS  work a process may have queued before a launch blocks
 *       (default 4 ms); a deeper queue, as the real driver's push buffer is, keeps
 *       a busy process device-bound on a loaded machine
 *   VGPU_STUB_TIMESLICE =1: the kernels of all processes on a device run one after
 *       another on one device timeline, as a GPU without MPS time-slices contexts
 *       (default: each process has a timeline of its own); with VGPU_STUB_STATE
 *   VGPU_STUB_CTX_MEM   device memory a context takes (default 64 MiB)
 *   VGPU_STUB_OBSERVER  file of the observer below (default: none)
 *   VGPU_STUB_OBSERVER_LIMIT  bytes; live bytes above it count as violations
 *   VGPU_STUB_HOST_PROC_FD  descriptor of the host's /proc (cuda_procs.c)
 *   VGPU_STUB_GPA_INTERNAL, VGPU_STUB_GPA_FUTURE, VGPU_STUB_PITCH_ALIGN,
 *   VGPU_STUB_POOL_STEP, VGPU_STUB_NVML_PROC_UTIL, VGPU_STUB_NVML_PROC_LIST,
 *   VGPU_STUB_CUDA_ORDER  driver behaviours, documented where they are read
 *   VGPU_STUB_IPC =unsupported: CUDA IPC answers CUDA_ERROR_NOT_SUPPORTED (cuda_share.c)
 *   VGPU_STUB_NO_UUID =1: cuDeviceGetUuid(_v2) answer CUDA_ERROR_NOT_SUPPORTED (cuda_core.c)
 *   VGPU_STUB_NVLINK =1: every card has an NVLink to every other (peer access,
 *       NVML P2P and NVLink queries; cuda_share.c, nvml_p2p.c)
 *   VGPU_STUB_DRIVER_SOCKET  remote mode (cuda_remote.c): the device list, device
 *       memory, contexts per process, work queues, utilisation, the devices'
 *       NVML facts and events live in the fake driver daemon on this Unix socket
 *       (e2e/fakedriver/PROTOCOL.md); VGPU_STUB_STATE, _DEVICES, _MEM, _SM and
 *       _WAVE_NS are then not read. Unset, remote mode is also on when
 *       /dev/nvidiactl is a Unix socket: the daemon's control node, mounted with
 *       the container's /dev/nvidia<minor> nodes, which then make its device list
 */
#ifndef VGPU_STUB_H
#define VGPU_STUB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define STUB_MAX_DEV 8
#define STUB_MAX_PROC 512
#define STUB_MAGIC UINT64_C(0x5354554256475055)

/* A process on one device, by host pid (cuda_procs.c). */
struct stub_proc {
	int32_t pid;                /* host pid, 0 = free */
	int32_t ctxs;               /* live contexts on the device */
	uint64_t first_ns;
	uint64_t enq_ns;            /* total busy time enqueued */
	uint64_t busy_until_ns;     /* end of this process's queued work */
	uint64_t dry_ns;            /* VGPU_STUB_TIMESLICE: time it launched into an empty queue */
	uint64_t mem;               /* device bytes it holds (NVML usedGpuMemory) */
};

struct stub_dev {
	uint64_t total;
	uint64_t used;
	int32_t sm;
	int32_t pad;
	char uuid[64];
	uint64_t busy_until_ns;     /* end of all queued work (VGPU_STUB_TIMESLICE) */
	struct stub_proc procs[STUB_MAX_PROC];
};

/*
 * Device memory that more than one process holds (cuda_share.c): memory a
 * process exported (cuIpcGetMemHandle, cuMemExportToShareableHandle) stays
 * allocated while any importer maps it, after its owner freed it too.
 */
#define STUB_MAX_XMEM 256
struct stub_xmem {
	uint64_t id;                /* 0 = free */
	uint64_t size;
	int32_t phys;
	int32_t owner;              /* host pid of the process that allocated it */
	int32_t refs;               /* the owner's allocation + each importer's open or import */
	int32_t owner_gone;         /* the owner freed it: the last importer releases it */
	int32_t owner_pid;          /* the owner's getpid() (the observer's key) */
	int32_t pad;
};

struct stub_shared {
	uint64_t magic;
	int32_t ndev;
	int32_t timeslice;          /* VGPU_STUB_TIMESLICE=1 at creation */
	uint64_t wave_ns;
	uint64_t max_queue_ns;
	uint64_t ctx_mem;
	struct stub_dev dev[STUB_MAX_DEV];
	int32_t xlock;              /* spin lock over the fields below */
	int32_t xpad;
	uint64_t next_xid;
	struct stub_xmem xmem[STUB_MAX_XMEM];
};

/* What reached the stub driver in this process. */
struct stub_stats {
	uint64_t alloc_calls;
	uint64_t free_calls;
	uint64_t launch_calls;
	uint64_t last_blocks;
	uint64_t held[STUB_MAX_DEV];    /* device bytes this process holds */
	uint64_t host_bytes;            /* page-locked host memory it holds (cuMemHostAlloc) */
};

/*
 * The observer: ground truth for "the limit holds", kept by the stub driver
 * and not by libvgpu. Every process that loads the stub with
 * VGPU_STUB_OBSERVER set adds the device bytes it hands out to one shared
 * record and takes back what is freed, so `live` is the bytes the simulated
 * devices really have allocated across all processes and `hwm` its maximum.
 *
 * A dead process's memory is freed by a real driver, so it stops counting
 * here too: each process owns an entry whose robust mutex a stub thread holds
 * for the process's lifetime. The kernel marks it "owner died" while the
 * dying process's memory is torn down, before its file descriptors are closed,
 * that is before libvgpu (which watches a file lock) can see the death and
 * give the memory to someone else. Dead entries are reaped whenever `live`
 * would raise `hwm`, so `hwm` never counts memory of the dead.
 */
#define STUB_OBS_PROCS 512
#define STUB_OBS_MAGIC UINT64_C(0x5354554f42534552)

union stub_lock {
	pthread_mutex_t m;
	char bytes[64];
};

struct stub_obs_proc {
	union stub_lock alive;      /* held by the owner's stub thread while it lives */
	int32_t pid;                /* 0 = free */
	int32_t pad;
	uint64_t bytes[STUB_MAX_DEV];
};

struct stub_observer {
	uint64_t magic;
	union stub_lock mu;         /* robust, guards everything below */
	uint64_t live[STUB_MAX_DEV];
	uint64_t hwm[STUB_MAX_DEV];
	uint64_t limit;             /* VGPU_STUB_OBSERVER_LIMIT at creation, 0 = none */
	uint64_t violations;        /* charges after which the living held more than limit */
	uint64_t procs;             /* processes that registered */
	uint64_t reaped;            /* processes found dead */
	uint64_t reaped_bytes;      /* device bytes they still held */
	struct stub_obs_proc proc[STUB_OBS_PROCS];
};

struct stub_shared *vgpuStubShared(void);
/* The observer mapped by this process, NULL without VGPU_STUB_OBSERVER. */
struct stub_observer *vgpuStubObserver(void);
/* Drops dead processes' bytes now; returns how many processes it reaped. */
int vgpuStubObserverReap(void);
struct stub_stats *vgpuStubStats(void);
uint64_t vgpuStubBusyNs(int dev, int pid);   /* pid: host pid */
/*
 * VGPU_STUB_TIMESLICE: how long the process had nothing queued on the device
 * before its launches, summed (its queue ran dry: it was not running, or held).
 */
uint64_t vgpuStubDryNs(int dev, int pid);
/* This process's pid as the driver knows it: in the host pid namespace. */
int32_t vgpuStubHostPid(void);
/* MIG model (cuda_core.c): the physical device in MIG mode (-1: none), its instances' UUIDs. */
int stub_mig_phys(void);
void stub_mig_uuid(int phys, int k, char *out, size_t len);
/* Whether a host pid is alive (the driver tears a process down when it dies). */
int stub_host_pid_alive(int32_t pid);
uint64_t vgpuStubNowNs(void);

/*
 * Remote mode (cuda_remote.c), used by the NVML stub too. stub_remote_load
 * connects and fetches the device list into vgpuStubShared() once (0, or -1
 * when the daemon is unreachable); the queries return -1 when it does not answer.
 */
struct stub_remote_proc { int32_t pid; int32_t ctxs; uint64_t bytes; };
struct stub_remote_sample { int32_t pid; uint32_t sm_pct; uint64_t ts_us; };
int stub_remote(void);
int stub_remote_load(void);
int stub_remote_mem(int phys, uint64_t *total, uint64_t *used);
int stub_remote_procs(int phys, struct stub_remote_proc *out, int cap);
int stub_remote_putil(int phys, uint64_t last_seen_us, struct stub_remote_sample *out, int cap);
int stub_remote_dutil(int phys);

/*
 * The facts NVML reads of a device (cuda_remote_dev.c): the daemon's DEV and
 * INFO in remote mode, fixed defaults in local mode (a PCIe card of a
 * one-socket server, minor number and PCI bus from its index).
 */
#define STUB_MAX_LINKS 36       /* NVML_NVLINK_MAX_LINKS */
#define STUB_MAX_CPUS 4096
#define STUB_EVENT_XID UINT64_C(0x8)    /* nvmlEventTypeXidCriticalError */
struct stub_facts {
	int minor;              /* /dev/nvidia<minor> */
	char bus_id[32];        /* nvmlPciInfo_t.busId, "%08X:%02X:%02X.%X" */
	int cc_major, cc_minor;
	int mig_capable;
	uint32_t pci_device_id, pci_subsystem_id;
	int numa;               /* NUMA node, -1: none */
	int ncpus;              /* CPUs of the ideal affinity; 0: not reported */
	uint64_t cpus[STUB_MAX_CPUS / 64];
	int nlinks;             /* active NVLinks, link 0 first; 0: no NVLink */
	struct { int to_switch; char bus_id[32]; } links[STUB_MAX_LINKS];
	uint64_t event_types;   /* nvmlEventType bits the device can raise */
};
/* 0 with *out filled, or -1 (remote: no answer, or the device refused). */
int stub_facts(int phys, struct stub_facts *out);
/*
 * Whether this process may use device phys, as opening /dev/nvidia<minor>
 * succeeds (remote: the daemon's OPEN, asked once): 0 yes, -1 refused, -2 no
 * answer. Always 0 in local mode.
 */
int stub_remote_open(int phys);
/* Remote mode: the device's name and PCI bus id as DEV gave them (no OPEN needed). */
const char *stub_remote_name(int phys);
int stub_remote_bus_id(int phys, char *out, size_t len);
/* The PCIe common ancestor of two devices (nvmlGpuTopologyLevel_t), -1: no answer. */
int stub_remote_topo(int a, int b);
/* The driver's version (SYS) into out[len]: 0, or -1. */
int stub_remote_driver_version(char *out, size_t len);

/*
 * NVML event sets (cuda_remote_events.c). register: 0, -1 refused, -2 no
 * answer; wait: 1 with an event, 0 on timeout, -1 when the daemon is gone.
 */
struct stub_evset;
struct stub_evset *stub_evset_new(void);
int stub_evset_register(struct stub_evset *s, int phys, uint64_t types);
int stub_evset_wait(struct stub_evset *s, unsigned timeout_ms, int *phys, uint64_t *type, uint64_t *data);
void stub_evset_free(struct stub_evset *s);

#endif /* VGPU_STUB_H */
