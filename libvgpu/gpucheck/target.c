/*
 * target.c - the device under test, as the parent finds it before any
 * check runs: is there a GPU at all, its UUID, its NVML index and the limit L.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"

/*
 * Device 0 is a GPU to test unless it is libvgpu's stub (its driver name says
 * "stub", or it has none: every NVIDIA driver names its devices), which only
 * counts with GPU_CHECK_ALLOW_STUB=1. Returns false when there is nothing to test.
 */
bool gc_find_gpu(struct gc_api *api, CUdevice *dev, char *name, size_t len)
{
	const char *allow = getenv("GPU_CHECK_ALLOW_STUB");
	int count = 0;
	if (gc_api_open(api, true) != 0 || api->cuInit == NULL || api->cuDeviceGetCount == NULL ||
	    api->cuDeviceGet == NULL)
		return false;
	if (api->cuInit(0) != CUDA_SUCCESS || api->cuDeviceGetCount(&count) != CUDA_SUCCESS ||
	    count <= 0 || api->cuDeviceGet(dev, 0) != CUDA_SUCCESS)
		return false;
	bool named = api->cuDeviceGetName != NULL &&
		     api->cuDeviceGetName(name, (int)len, *dev) == CUDA_SUCCESS;
	if (!named)
		snprintf(name, len, "(no name)");
	if (named && strstr(name, "stub") == NULL)
		return true;
	return allow != NULL && strcmp(allow, "1") == 0;
}

/*
 * Without a UUID from CUDA (a driver older than CUDA 9.2 has no
 * cuDeviceGetUuid; the call may also fail): CUDA ordinal k is the k-th
 * CUDA_VISIBLE_DEVICES entry (an index or a GPU- UUID prefix), or else the
 * k-th device in PCI bus order (main sets CUDA_DEVICE_ORDER=PCI_BUS_ID),
 * which is NVML's index order (CUDA C Programming Guide, "CUDA Environment
 * Variables"; NVML API reference, nvmlDeviceGetHandleByIndex).
 */
static bool uuid_from_nvml(const struct gc_api *api, int ordinal, char *buf, size_t len)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	char entry[NVML_DEVICE_UUID_BUFFER_SIZE];
	unsigned int count = 0;
	snprintf(entry, sizeof(entry), "%d", ordinal);
	if (cvd != NULL) {
		const char *p = cvd;
		for (int k = 0; k < ordinal && p != NULL; k++) {
			p = strchr(p, ',');
			if (p != NULL)
				p++;
		}
		if (p == NULL)
			return false;
		snprintf(entry, sizeof(entry), "%.*s", (int)strcspn(p, ","), p);
	}
	if (!api->nvml_ready || api->nvmlDeviceGetCount_v2 == NULL ||
	    api->nvmlDeviceGetHandleByIndex_v2 == NULL || api->nvmlDeviceGetUUID == NULL ||
	    api->nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
		return false;
	bool by_uuid = strncmp(entry, "GPU-", 4) == 0;
	char *end;
	unsigned long want = strtoul(entry, &end, 10);
	if (!by_uuid && (entry[0] == '\0' || *end != '\0'))
		return false; /* a MIG- UUID or something CUDA would not accept */
	for (unsigned int i = 0; i < count; i++) {
		nvmlDevice_t h;
		char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (api->nvmlDeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS ||
		    api->nvmlDeviceGetUUID(h, uuid, sizeof(uuid)) != NVML_SUCCESS)
			continue;
		bool match = by_uuid ? strncmp(uuid, entry, strlen(entry)) == 0 : i == want;
		if (match) {
			snprintf(buf, len, "%s", uuid);
			return true;
		}
	}
	return false;
}

/*
 * The device under test, CUDA ordinal `ordinal` (dev is its handle): its
 * UUID (CUDA_VISIBLE_DEVICES of every check), its NVML index (libvgpu
 * indexes limits by it: CUDA_DEVICE_MEMORY_LIMIT_<index>, 0 on a node whose
 * first GPU is tested) and L = min(1 GiB, memory / 4).
 */
int gc_describe_target(const struct gc_api *api, int ordinal, CUdevice dev, struct gc_target *t,
		       size_t *total)
{
	gc_uuid u;
	nvmlDevice_t h;
	unsigned int index = 0;
	CUresult r = api->cuDeviceTotalMem_v2 != NULL ? api->cuDeviceTotalMem_v2(total, dev)
						       : CUDA_ERROR_NOT_FOUND;
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "gpu_check: cannot read the memory size of device %d: "
			"cuDeviceTotalMem_v2 %s\n", ordinal,
			api->cuDeviceTotalMem_v2 != NULL ? gc_cuerr(api, r) : "missing");
		return -1;
	}
	t->limit = *total / 4 / GC_MIB * GC_MIB;
	if (t->limit > 1024 * GC_MIB)
		t->limit = 1024 * GC_MIB;
	if ((api->cuDeviceGetUuid_v2 != NULL && api->cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) ||
	    (api->cuDeviceGetUuid != NULL && api->cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS))
		gc_format_uuid(&u, t->uuid, sizeof(t->uuid));
	else if (!uuid_from_nvml(api, ordinal, t->uuid, sizeof(t->uuid))) {
		fprintf(stderr, "gpu_check: cannot tell the UUID of device %d "
			"(no UUID from cuDeviceGetUuid, and NVML does not list device %d as "
			"CUDA_VISIBLE_DEVICES names it)\n", ordinal, ordinal);
		return -1;
	}
	if (gc_nvml_find(api, t->uuid, &h, &index) != 0) {
		index = (unsigned int)ordinal;
		fprintf(stderr, "gpu_check: NVML does not list %s; assuming device index %d\n",
			t->uuid, ordinal);
	}
	t->index = (int)index;
	return 0;
}
