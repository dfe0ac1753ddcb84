/*
 * nvml.c - what nvidia-smi and monitoring inside the container see: the
 * memory queries report the limit as the total and the container's usage
 * (all its processes) as used; the process queries list only the
 * container's processes.
 *
 * NVML indices are container device indices already (NVML ignores
 * CUDA_VISIBLE_DEVICES), so no remapping is needed here.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "hooks.h"

/* Returns the limit for the device, 0 when its figures are left untouched. */
static uint64_t share_of(nvmlDevice_t device, int *idx_out)
{
	unsigned int idx;
	if (!vgpu_cfg.any_mem_limit || REAL(nvmlDeviceGetIndex) == NULL ||
	    REAL(nvmlDeviceGetIndex)(device, &idx) != NVML_SUCCESS || idx >= VGPU_MAX_DEVICES)
		return 0;
	*idx_out = (int)idx;
	return vgpu_cfg.mem_limit[idx];
}

/* The container's share as cuMemGetInfo shows it (memory.c), and its usage. */
static void clamp(int idx, unsigned long long *total, unsigned long long *free_b, unsigned long long *used)
{
	uint64_t limit = vgpu_shown_total(idx, *total);
	uint64_t u = vgpu_region_used(idx);
	if (u > limit)
		u = limit;
	*total = limit;
	*used = u;
	*free_b = limit - u;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	int idx = -1;
	VGPU_ENTER_NVML(nvmlDeviceGetMemoryInfo);
	nvmlReturn_t rc = REAL(nvmlDeviceGetMemoryInfo)(device, memory);
	if (rc == NVML_SUCCESS && memory != NULL && share_of(device, &idx) != 0)
		clamp(idx, &memory->total, &memory->free, &memory->used);
	return rc;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	int idx = -1;
	VGPU_ENTER_NVML(nvmlDeviceGetMemoryInfo_v2);
	nvmlReturn_t rc = REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
	if (rc == NVML_SUCCESS && memory != NULL && share_of(device, &idx) != 0) {
		/* The driver's reservation is not part of the container's share. */
		memory->reserved = 0;
		clamp(idx, &memory->total, &memory->free, &memory->used);
	}
	return rc;
}

/*
 * ---- What the container sees of the device's processes ----
 *
 * NVML lists every process on the device, by host pid, with the memory the
 * driver gives each (NVML API reference). Inside a shared container that
 * shows the neighbours' processes and memory, and pids nothing in the
 * container can name. The process queries below keep only the container's
 * processes (the live slots of its region, by the host pid each learned,
 * hostpid.c), report each by its pid in the container and with the memory
 * libvgpu counts for it (what nvmlDeviceGetMemoryInfo adds up as "used").
 * A process whose host pid is unknown cannot be recognised and is left out.
 * The caller's protocol is NVML's: *infoCount = 0 (or no array) asks for the
 * count, too small an array gets NVML_ERROR_INSUFFICIENT_SIZE and the count.
 */
enum plist_fn { COMPUTE_V1, COMPUTE_V2, COMPUTE_V3, GRAPHICS_V1, GRAPHICS_V2, GRAPHICS_V3 };

#define VIEW_BUF 256

static bool view_on(void) { return vgpu_cfg.accounting || vgpu_cfg.any_sm_limit; }

static nvmlReturn_t real_plist(enum plist_fn fn, nvmlDevice_t d, unsigned int *n, void *buf)
{
	switch (fn) {
	case COMPUTE_V1: return REAL(nvmlDeviceGetComputeRunningProcesses)(d, n, buf);
	case COMPUTE_V2: return REAL(nvmlDeviceGetComputeRunningProcesses_v2)(d, n, buf);
	case COMPUTE_V3: return REAL(nvmlDeviceGetComputeRunningProcesses_v3)(d, n, buf);
	case GRAPHICS_V1: return REAL(nvmlDeviceGetGraphicsRunningProcesses)(d, n, buf);
	case GRAPHICS_V2: return REAL(nvmlDeviceGetGraphicsRunningProcesses_v2)(d, n, buf);
	default: return REAL(nvmlDeviceGetGraphicsRunningProcesses_v3)(d, n, buf);
	}
}

static bool is_v1(enum plist_fn fn) { return fn == COMPUTE_V1 || fn == GRAPHICS_V1; }

/* The container index of an NVML handle, -1 for MIG handles and errors. */
static int index_of(nvmlDevice_t d)
{
	unsigned int idx;
	if (REAL(nvmlDeviceGetIndex) == NULL || REAL(nvmlDeviceGetIndex)(d, &idx) != NVML_SUCCESS ||
	    idx >= VGPU_MAX_DEVICES)
		return -1;
	return (int)idx;
}

/* The container's process with host pid `hostpid`, or NULL. */
static const struct vgpu_rproc *ours(const struct vgpu_rproc *procs, int n, unsigned int hostpid)
{
	for (int i = 0; i < n; i++)
		if (procs[i].hostpid > 0 && (unsigned int)procs[i].hostpid == hostpid)
			return &procs[i];
	return NULL;
}

/* All of NVML's entries, in a buffer that grows once if the device has more. */
static nvmlReturn_t fetch_all(enum plist_fn fn, nvmlDevice_t d, unsigned int *n, char **buf,
			      char *stack)
{
	size_t size = is_v1(fn) ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);
	*buf = stack;
	*n = VIEW_BUF;
	nvmlReturn_t rc = real_plist(fn, d, n, *buf);
	if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
		return rc;
	unsigned int want = *n + 16;
	*buf = malloc(want * size);
	if (*buf == NULL)
		return NVML_ERROR_UNKNOWN;
	*n = want;
	return real_plist(fn, d, n, *buf);
}

static nvmlReturn_t plist_view(enum plist_fn fn, nvmlDevice_t device, unsigned int *count,
			       void *infos)
{
	if (!view_on() || count == NULL)
		return real_plist(fn, device, count, infos);
	char stack[VIEW_BUF * sizeof(nvmlProcessInfo_t)], *buf;
	unsigned int n;
	nvmlReturn_t rc = fetch_all(fn, device, &n, &buf, stack);
	struct vgpu_rproc procs[64];
	int np = vgpu_region_procs(index_of(device), procs, 64);
	unsigned int kept = 0;
	for (unsigned int i = 0; rc == NVML_SUCCESS && i < n; i++) {
		nvmlProcessInfo_t e = is_v1(fn) ? (nvmlProcessInfo_t){((nvmlProcessInfo_v1_t *)buf)[i].pid,
			((nvmlProcessInfo_v1_t *)buf)[i].usedGpuMemory, 0, 0} : ((nvmlProcessInfo_t *)buf)[i];
		const struct vgpu_rproc *p = ours(procs, np, e.pid);
		if (p == NULL)
			continue;
		e.pid = (unsigned int)p->pid;
		if (p->mem != UINT64_MAX)
			e.usedGpuMemory = p->mem;
		if (infos != NULL && kept < *count) {
			if (is_v1(fn))
				((nvmlProcessInfo_v1_t *)infos)[kept] =
					(nvmlProcessInfo_v1_t){e.pid, e.usedGpuMemory};
			else
				((nvmlProcessInfo_t *)infos)[kept] = e;
		}
		kept++;
	}
	if (buf != stack)
		free(buf);
	if (rc != NVML_SUCCESS)
		return rc;
	bool fits = kept <= *count && (infos != NULL || kept == 0);
	*count = kept;
	return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

#define PLIST_HOOK(name, fn, type)                                                       \
	VGPU_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, type *infos) \
	{                                                                                \
		VGPU_ENTER_NVML(name);                                                   \
		return plist_view(fn, device, infoCount, infos);                         \
	}

PLIST_HOOK(nvmlDeviceGetComputeRunningProcesses, COMPUTE_V1, nvmlProcessInfo_v1_t)
PLIST_HOOK(nvmlDeviceGetComputeRunningProcesses_v2, COMPUTE_V2, nvmlProcessInfo_t)
PLIST_HOOK(nvmlDeviceGetComputeRunningProcesses_v3, COMPUTE_V3, nvmlProcessInfo_t)
PLIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses, GRAPHICS_V1, nvmlProcessInfo_v1_t)
PLIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses_v2, GRAPHICS_V2, nvmlProcessInfo_t)
PLIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses_v3, GRAPHICS_V3, nvmlProcessInfo_t)

/*
 * The R550 form of the same lists (nvmlDeviceGetRunningProcessDetailList,
 * which newer nvidia-smi uses): the same filter, on the caller's structure.
 */
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
							       nvmlProcessDetailList_t *plist)
{
	VGPU_ENTER_NVML(nvmlDeviceGetRunningProcessDetailList);
	if (!view_on() || plist == NULL || plist->version != nvmlProcessDetailList_v1)
		return REAL(nvmlDeviceGetRunningProcessDetailList)(device, plist);
	nvmlProcessDetail_v1_t buf[VIEW_BUF];
	nvmlProcessDetailList_t all = {plist->version, plist->mode, VIEW_BUF, buf};
	nvmlReturn_t rc = REAL(nvmlDeviceGetRunningProcessDetailList)(device, &all);
	if (rc != NVML_SUCCESS)
		return rc;
	struct vgpu_rproc procs[64];
	int np = vgpu_region_procs(index_of(device), procs, 64);
	unsigned int kept = 0, cap = plist->numProcArrayEntries;
	for (unsigned int i = 0; i < all.numProcArrayEntries && i < VIEW_BUF; i++) {
		const struct vgpu_rproc *p = ours(procs, np, buf[i].pid);
		if (p == NULL)
			continue;
		if (plist->procArray != NULL && kept < cap) {
			plist->procArray[kept] = buf[i];
			plist->procArray[kept].pid = (unsigned int)p->pid;
			if (p->mem != UINT64_MAX)
				plist->procArray[kept].usedGpuMemory = p->mem;
		}
		kept++;
	}
	bool fits = kept <= cap && (plist->procArray != NULL || kept == 0);
	plist->numProcArrayEntries = kept;
	return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

/* Per-process utilisation samples: the container's processes only, by container pid. */
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
							 nvmlProcessUtilizationSample_t *utilization,
							 unsigned int *processSamplesCount,
							 unsigned long long lastSeenTimeStamp)
{
	VGPU_ENTER_NVML(nvmlDeviceGetProcessUtilization);
	if (!view_on() || processSamplesCount == NULL)
		return REAL(nvmlDeviceGetProcessUtilization)(device, utilization, processSamplesCount,
							     lastSeenTimeStamp);
	nvmlProcessUtilizationSample_t buf[VIEW_BUF];
	unsigned int n = VIEW_BUF;
	nvmlReturn_t rc = REAL(nvmlDeviceGetProcessUtilization)(device, buf, &n, lastSeenTimeStamp);
	if (rc != NVML_SUCCESS)
		return rc;
	struct vgpu_rproc procs[64];
	int np = vgpu_region_procs(index_of(device), procs, 64);
	unsigned int kept = 0;
	for (unsigned int i = 0; i < n && i < VIEW_BUF; i++) {
		const struct vgpu_rproc *p = ours(procs, np, buf[i].pid);
		if (p == NULL)
			continue;
		if (utilization != NULL && kept < *processSamplesCount) {
			utilization[kept] = buf[i];
			utilization[kept].pid = (unsigned int)p->pid;
		}
		kept++;
	}
	bool fits = kept <= *processSamplesCount && (utilization != NULL || kept == 0);
	*processSamplesCount = kept;
	if (kept == 0)
		return NVML_ERROR_NOT_FOUND;    /* "no valid sample entries", as NVML says it */
	return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}
