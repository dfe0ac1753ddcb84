/*
 * nvml_stub.c - stub NVML over the stub driver's shared device state.
 * Per-process SM utilisation is the busy time a process's kernels completed
 * since this querier last asked, divided by the elapsed time. Processes are
 * reported by host pid, as the real NVML does inside containers
 * (cuda_procs.c), and only while alive.
 *
 * Modes, each a behaviour the NVML API reference documents:
 *   VGPU_STUB_NVML_PROC_UTIL=unsupported  nvmlDeviceGetProcessUtilization
 *       returns NVML_ERROR_NOT_SUPPORTED ("On MIG-enabled GPUs, querying
 *       process utilization is not currently supported"; also pre-Maxwell)
 *   VGPU_STUB_NVML_DEV_UTIL=unsupported  nvmlDeviceGetUtilizationRates does
 *       too ("On MIG-enabled GPUs, querying device utilization rates is not
 *       currently supported")
 *   VGPU_STUB_NVML_PROC_LIST=unsupported  the running-process queries return
 *       NVML_ERROR_NOT_SUPPORTED ("if this query is not supported by device")
 *
 * In remote mode (cuda_remote.c) the device list, memory, process lists and
 * utilisation are the fake driver daemon's; when it does not answer, nvmlInit
 * and those queries return NVML_ERROR_UNKNOWN. Initialisation, handles,
 * memory, utilisation and processes are here; a device's facts in
 * nvml_device.c, MIG in nvml_mig.c, topology and NVLink in nvml_topology.c,
 * events in nvml_events.c. Each function answers as its page of the NVML API
 * reference (https://docs.nvidia.com/deploy/nvml-api/) documents, error
 * codes included.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "nvml_stub.h"

static struct nvmlDevice_st mig_devs[STUB_MAX_DEV][2];

static int unsupported(const char *mode)
{
	const char *v = getenv(mode);
	return v != NULL && strcmp(v, "unsupported") == 0;
}

/* A process the driver still knows on the device: has a pid and is alive. */
static int listed(const struct stub_proc *p, int need_ctx)
{
	int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_ACQUIRE);
	if (pid == 0 || (need_ctx && __atomic_load_n(&p->ctxs, __ATOMIC_RELAXED) <= 0))
		return 0;
	return stub_host_pid_alive(pid);
}
static struct nvmlDevice_st devs[STUB_MAX_DEV];
/* nvmlInit calls not yet matched by nvmlShutdown; -1: never initialised. */
static int init_count = -1;
#define inited (__atomic_load_n(&init_count, __ATOMIC_ACQUIRE) > 0)

int stub_nvml_inited(void) { return inited; }

nvmlDevice_t stub_nvml_handle(int index) { return &devs[index]; }

int stub_nvml_gpu(nvmlDevice_t device)
{
	if (device < devs || device >= devs + STUB_MAX_DEV || (int)device->index >= vgpuStubShared()->ndev)
		return -1;
	return (int)device->index;
}

nvmlDevice_t stub_nvml_mig_handle(int index, int k) { return &mig_devs[index][k]; }

int stub_nvml_valid(nvmlDevice_t device)
{
	if (stub_nvml_gpu(device) >= 0)
		return 1;
	return device >= &mig_devs[0][0] && device < &mig_devs[0][0] + STUB_MAX_DEV * 2;
}

nvmlReturn_t stub_nvml_check(nvmlDevice_t device, int *index)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (device->mig != 0)
		return NVML_ERROR_NOT_SUPPORTED;    /* a MIG instance (local mode): its GPU's facts only */
	*index = (int)device->index;
	return NVML_SUCCESS;
}

nvmlReturn_t stub_nvml_check_pair(nvmlDevice_t device1, nvmlDevice_t device2, int *i, int *j)
{
	nvmlReturn_t rc = stub_nvml_check(device1, i);
	if (rc == NVML_SUCCESS)
		rc = stub_nvml_check(device2, j);
	return rc == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_INVALID_ARGUMENT : rc;
}

nvmlReturn_t stub_nvml_facts(int index, struct stub_facts *f)
{
	return stub_facts(index, f) == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t stub_nvml_string(char *out, unsigned int length, const char *s)
{
	if (strlen(s) >= length)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(out, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

/*
 * nvmlInit_v2 (NVML API reference, "Initialization and Cleanup"): a
 * reference count of initialisations, each matched by an nvmlShutdown. In
 * remote mode the device list is the daemon's; NVML_ERROR_UNKNOWN when it
 * does not answer.
 */
nvmlReturn_t nvmlInit_v2(void)
{
	if (stub_remote() && stub_remote_load() != 0)
		return NVML_ERROR_UNKNOWN;
	for (unsigned i = 0; i < STUB_MAX_DEV; i++) {
		devs[i].index = i;
		for (unsigned k = 0; k < 2; k++)
			mig_devs[i][k] = (struct nvmlDevice_st){i, k + 1};
	}
	int n = __atomic_load_n(&init_count, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&init_count, &n, n < 0 ? 1 : n + 1, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

/*
 * nvmlShutdown: "No error will be reported if this is called more times
 * than nvmlInit_v2"; NVML_ERROR_UNINITIALIZED "if the NVML Library was not
 * previously initialized".
 */
nvmlReturn_t nvmlShutdown(void)
{
	int n = __atomic_load_n(&init_count, __ATOMIC_ACQUIRE);
	if (n < 0)
		return NVML_ERROR_UNINITIALIZED;
	while (n > 0 && !__atomic_compare_exchange_n(&init_count, &n, n - 1, 0, __ATOMIC_ACQ_REL,
						     __ATOMIC_ACQUIRE))
		;
	return NVML_SUCCESS;
}

/*
 * nvmlSystemGetDriverVersion: the daemon's (SYS) in remote mode;
 * NVML_ERROR_INSUFFICIENT_SIZE "if length is too small".
 */
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "550.00-stub";
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (version == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (stub_remote() && stub_remote_driver_version(v, sizeof(v)) != 0)
		return NVML_ERROR_UNKNOWN;
	return stub_nvml_string(version, length, v);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	*count = (unsigned)vgpuStubShared()->ndev;
	return NVML_SUCCESS;
}

/*
 * A device the daemon refuses (remote mode: its /dev/nvidia<minor> is not
 * the driver's) still counts in nvmlDeviceGetCount_v2, which "returns count
 * of all devices in the system even if nvmlDeviceGetHandleByIndex_v2
 * returns NVML_ERROR_NO_PERMISSION for such device" (NVML API reference);
 * its handle is refused with NVML_ERROR_NO_PERMISSION, "if the user doesn't
 * have permission to talk to this device".
 */
static nvmlReturn_t open_device(unsigned int index)
{
	switch (stub_remote_open((int)index)) {
	case 0:
		return NVML_SUCCESS;
	case -1:
		return NVML_ERROR_NO_PERMISSION;
	}
	return NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= (unsigned)vgpuStubShared()->ndev || device == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t rc = open_device(index);
	if (rc != NVML_SUCCESS)
		return rc;
	*device = &devs[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	if (!stub_nvml_valid(device) || index == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (device->mig != 0)
		return NVML_ERROR_NOT_SUPPORTED;    /* MIG handles have no index of their own */
	*index = device->index;
	return NVML_SUCCESS;
}

/* nvmlDeviceGetUUID: NVML_ERROR_INSUFFICIENT_SIZE "if length is too small". */
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || uuid == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (device->mig != 0)
		stub_mig_uuid((int)device->index, (int)device->mig - 1, u, sizeof(u));
	else
		snprintf(u, sizeof(u), "%s", vgpuStubShared()->dev[device->index].uuid);
	return stub_nvml_string(uuid, length, u);
}

/* A GPU or a MIG instance by its full UUID (NVML API reference). */
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	char u[64];
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (uuid == NULL || device == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int d = 0; d < vgpuStubShared()->ndev; d++) {
		if (strcmp(vgpuStubShared()->dev[d].uuid, uuid) == 0) {
			/*
			 * The reference lists no NVML_ERROR_NO_PERMISSION here; a
			 * device the daemon refuses gets it as from the index and PCI
			 * bus id look-ups, which do list it, rather than a handle.
			 */
			nvmlReturn_t rc = open_device((unsigned)d);
			if (rc != NVML_SUCCESS)
				return rc;
			*device = &devs[d];
			return NVML_SUCCESS;
		}
		for (int k = 0; d == stub_mig_phys() && k < 2; k++) {
			stub_mig_uuid(d, k, u, sizeof(u));
			if (strcmp(u, uuid) == 0) {
				*device = &mig_devs[d][k];
				return NVML_SUCCESS;
			}
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device)
{
	if (!stub_nvml_valid(mig) || device == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (mig->mig == 0)
		return NVML_ERROR_NOT_FOUND;
	*device = &devs[mig->index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || memory == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct stub_dev *d = &vgpuStubShared()->dev[device->index];
	uint64_t total = d->total, used = __atomic_load_n(&d->used, __ATOMIC_RELAXED);
	if (stub_remote() && stub_remote_mem((int)device->index, &total, &used) != 0)
		return NVML_ERROR_UNKNOWN;
	memory->total = total;
	memory->used = used;
	memory->free = total - used;
	return NVML_SUCCESS;
}

#ifndef STUB_MINIMAL
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	nvmlMemory_t m;
	if (memory == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(device, &m);
	if (rc != NVML_SUCCESS)
		return rc;
	memory->total = m.total;
	memory->reserved = 32u << 20;
	memory->used = m.used + memory->reserved;
	memory->free = m.total - memory->used;
	return NVML_SUCCESS;
}

/* What this querier saw last time, per device and pid. */
struct seen { unsigned int dev; int pid; uint64_t t, busy; };
static struct seen seen[1024];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned int util_since(unsigned int dev, const struct stub_proc *p, uint64_t now)
{
	uint64_t busy = vgpuStubBusyNs((int)dev, p->pid);
	struct seen *s = NULL, *free_slot = NULL;
	for (int i = 0; i < 1024; i++) {
		if (seen[i].pid == p->pid && seen[i].dev == dev)
			s = &seen[i];
		else if (seen[i].pid == 0 && free_slot == NULL)
			free_slot = &seen[i];
	}
	uint64_t t0 = s ? s->t : p->first_ns, b0 = s ? s->busy : 0;
	if (s == NULL && free_slot != NULL) {
		s = free_slot;
		s->pid = p->pid;
		s->dev = dev;
	}
	if (s != NULL) {
		s->t = now;
		s->busy = busy;
	}
	if (now <= t0)
		return 0;
	uint64_t u = (busy - b0) * 100 / (now - t0);
	return u > 100 ? 100 : (unsigned int)u;
}

/* The daemon's samples (PUTIL), one per process, with the same count protocol. */
static nvmlReturn_t remote_putil(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
				 unsigned int *count, unsigned long long lastSeen)
{
	struct stub_remote_sample s[STUB_MAX_PROC];
	int n = stub_remote_putil((int)device->index, lastSeen, s, STUB_MAX_PROC);
	if (n < 0)
		return NVML_ERROR_UNKNOWN;
	if (n == 0)
		return NVML_ERROR_NOT_FOUND;
	if (utilization == NULL || *count < (unsigned int)n) {
		*count = (unsigned int)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (int i = 0; i < n; i++)
		utilization[i] = (nvmlProcessUtilizationSample_t){
			.pid = (unsigned int)s[i].pid, .timeStamp = s[i].ts_us, .smUtil = s[i].sm_pct};
	*count = (unsigned int)n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
					     nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *count, unsigned long long lastSeen)
{
	(void)lastSeen;
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (unsupported("VGPU_STUB_NVML_PROC_UTIL"))
		return NVML_ERROR_NOT_SUPPORTED;
	if (stub_remote())
		return remote_putil(device, utilization, count, lastSeen);
	struct stub_dev *d = &vgpuStubShared()->dev[device->index];
	unsigned int n = 0;
	for (int i = 0; i < STUB_MAX_PROC; i++)
		if (listed(&d->procs[i], 0))
			n++;
	if (n == 0)
		return NVML_ERROR_NOT_FOUND;
	if (utilization == NULL || *count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	struct timeval tv;
	gettimeofday(&tv, NULL);
	unsigned long long stamp = (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
	uint64_t now = vgpuStubNowNs();
	unsigned int k = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < STUB_MAX_PROC && k < n; i++) {
		const struct stub_proc *p = &d->procs[i];
		if (!listed(p, 0))
			continue;
		utilization[k] = (nvmlProcessUtilizationSample_t){
			.pid = (unsigned int)p->pid, .timeStamp = stamp,
			.smUtil = util_since(device->index, p, now)};
		k++;
	}
	pthread_mutex_unlock(&mu);
	*count = k;
	return NVML_SUCCESS;
}

/* Device-wide: the busy time of all its processes since this querier last asked. */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	static uint64_t last_t[STUB_MAX_DEV], last_busy[STUB_MAX_DEV];
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || utilization == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (unsupported("VGPU_STUB_NVML_DEV_UTIL"))
		return NVML_ERROR_NOT_SUPPORTED;
	if (stub_remote()) {
		int pct = stub_remote_dutil((int)device->index);
		if (pct < 0)
			return NVML_ERROR_UNKNOWN;
		*utilization = (nvmlUtilization_t){.gpu = (unsigned int)pct, .memory = 0};
		return NVML_SUCCESS;
	}
	unsigned int idx = device->index;
	struct stub_dev *d = &vgpuStubShared()->dev[idx];
	uint64_t now = vgpuStubNowNs(), busy = 0;
	for (int i = 0; i < STUB_MAX_PROC; i++) {
		int32_t pid = __atomic_load_n(&d->procs[i].pid, __ATOMIC_ACQUIRE);
		if (pid != 0)
			busy += vgpuStubBusyNs((int)idx, pid);
	}
	pthread_mutex_lock(&mu);
	uint64_t dt = last_t[idx] != 0 && now > last_t[idx] ? now - last_t[idx] : 0;
	uint64_t db = busy > last_busy[idx] ? busy - last_busy[idx] : 0;
	last_t[idx] = now;
	last_busy[idx] = busy;
	pthread_mutex_unlock(&mu);
	uint64_t u = dt != 0 ? db * 100 / dt : 0;
	utilization->gpu = u > 100 ? 100 : (unsigned int)u;
	utilization->memory = 0;
	return NVML_SUCCESS;
}
#endif

/* Entry k of a v1 or a v2/v3 list; the instance ids are 0xFFFFFFFF without MIG. */
static void put_proc(void *infos, unsigned int k, int v1, unsigned int pid, unsigned long long mem)
{
	if (v1)
		((nvmlProcessInfo_v1_t *)infos)[k] = (nvmlProcessInfo_v1_t){pid, mem};
	else
		((nvmlProcessInfo_t *)infos)[k] = (nvmlProcessInfo_t){pid, mem, 0xFFFFFFFFu, 0xFFFFFFFFu};
}

/*
 * Processes with a context on the device, by host pid, with the device
 * memory each holds (remote mode: the daemon's PROCS). Protocol of the NVML API reference: *infoCount = 0 asks
 * for the count (NVML_ERROR_INSUFFICIENT_SIZE, or NVML_SUCCESS when none run);
 * too small an array gets NVML_ERROR_INSUFFICIENT_SIZE and the count needed.
 */
static nvmlReturn_t running(nvmlDevice_t device, unsigned int *count, void *infos, int v1)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (unsupported("VGPU_STUB_NVML_PROC_LIST"))
		return NVML_ERROR_NOT_SUPPORTED;
	unsigned int n = 0, cap = *count;
	if (stub_remote()) {
		struct stub_remote_proc rp[STUB_MAX_PROC];
		int got = stub_remote_procs((int)device->index, rp, STUB_MAX_PROC);
		if (got < 0)
			return NVML_ERROR_UNKNOWN;
		for (; (int)n < got && n < STUB_MAX_PROC; n++)
			if (n < cap && infos != NULL)
				put_proc(infos, n, v1, (unsigned int)rp[n].pid, rp[n].bytes);
	} else {
		struct stub_dev *d = &vgpuStubShared()->dev[device->index];
		for (int i = 0; i < STUB_MAX_PROC; i++) {
			const struct stub_proc *p = &d->procs[i];
			if (!listed(p, 1))
				continue;
			if (n < cap && infos != NULL)
				put_proc(infos, n, v1, (unsigned int)p->pid,
					 __atomic_load_n(&p->mem, __ATOMIC_RELAXED));
			n++;
		}
	}
	*count = n;
	if (n > cap || (n > 0 && infos == NULL))
		return NVML_ERROR_INSUFFICIENT_SIZE;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos)
{
	return running(device, infoCount, infos, 1);
}

#ifndef STUB_MINIMAL
/* The R550 list: compute processes for modes COMPUTE and ALL, none for the others here. */
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
						   nvmlProcessDetailList_t *plist)
{
	nvmlProcessInfo_t buf[STUB_MAX_PROC];
	if (plist == NULL || plist->version != nvmlProcessDetailList_v1 ||
	    plist->mode > NVML_PROCESS_MODE_ALL)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned int n = STUB_MAX_PROC;
	nvmlReturn_t rc = NVML_SUCCESS;
	if (plist->mode == NVML_PROCESS_MODE_COMPUTE || plist->mode == NVML_PROCESS_MODE_ALL)
		rc = running(device, &n, buf, 0);
	else
		n = 0;
	if (rc != NVML_SUCCESS)
		return rc;
	unsigned int cap = plist->numProcArrayEntries;
	for (unsigned int i = 0; i < n && i < cap && plist->procArray != NULL; i++)
		plist->procArray[i] = (nvmlProcessDetail_v1_t){buf[i].pid, buf[i].usedGpuMemory,
			buf[i].gpuInstanceId, buf[i].computeInstanceId, 0};
	plist->numProcArrayEntries = n;
	return n > cap || (n > 0 && plist->procArray == NULL) ? NVML_ERROR_INSUFFICIENT_SIZE
								: NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos)
{
	return running(device, infoCount, infos, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos)
{
	return running(device, infoCount, infos, 0);
}
#endif
