/*
 * nvml_stub.c - stub NVML over the stub driver's shared device state.
 * Per-process SM utilisation is the busy time a process's kernels completed
 * since this querier last asked, divided by the elapsed time.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "nvml_api.h"
#include "stub.h"

struct nvmlDevice_st { unsigned int index; };
static struct nvmlDevice_st devs[STUB_MAX_DEV];
static int inited;

nvmlReturn_t nvmlInit_v2(void)
{
	inited = 1;
	for (unsigned i = 0; i < STUB_MAX_DEV; i++)
		devs[i].index = i;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	snprintf(version, length, "550.00-stub");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	*count = (unsigned)vgpuStubShared()->ndev;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= (unsigned)vgpuStubShared()->ndev || device == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &devs[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	if (device == NULL || index == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = device->index;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	snprintf(uuid, length, "%s", vgpuStubShared()->dev[device->index].uuid);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (device == NULL || memory == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct stub_dev *d = &vgpuStubShared()->dev[device->index];
	memory->total = d->total;
	memory->used = __atomic_load_n(&d->used, __ATOMIC_RELAXED);
	memory->free = memory->total - memory->used;
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

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
					     nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *count, unsigned long long lastSeen)
{
	(void)lastSeen;
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (device == NULL || count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct stub_dev *d = &vgpuStubShared()->dev[device->index];
	unsigned int n = 0;
	for (int i = 0; i < STUB_MAX_PROC; i++)
		if (__atomic_load_n(&d->procs[i].pid, __ATOMIC_ACQUIRE) != 0)
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
		if (__atomic_load_n(&p->pid, __ATOMIC_ACQUIRE) == 0)
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
#endif
