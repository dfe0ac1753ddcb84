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
 * Without cuDeviceGetUuid: CUDA ordinal 0 is the first CUDA_VISIBLE_DEVICES
 * entry, or else the first device in PCI bus order (main sets
 * CUDA_DEVICE_ORDER=PCI_BUS_ID), which is NVML's order.
 */
static bool uuid_from_nvml(const struct gc_api *api, char *buf, size_t len)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	char first[NVML_DEVICE_UUID_BUFFER_SIZE] = "0";
	unsigned int count = 0;
	if (cvd != NULL)
		snprintf(first, sizeof(first), "%.*s", (int)strcspn(cvd, ","), cvd);
	if (!api->nvml_ready || api->nvmlDeviceGetCount_v2 == NULL ||
	    api->nvmlDeviceGetHandleByIndex_v2 == NULL || api->nvmlDeviceGetUUID == NULL ||
	    api->nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
		return false;
	bool by_uuid = strncmp(first, "GPU-", 4) == 0;
	for (unsigned int i = 0; i < count; i++) {
		nvmlDevice_t h;
		char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (api->nvmlDeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS ||
		    api->nvmlDeviceGetUUID(h, uuid, sizeof(uuid)) != NVML_SUCCESS)
			continue;
		bool match = by_uuid ? strncmp(uuid, first, strlen(first)) == 0
				     : i == strtoul(first, NULL, 10);
		if (match) {
			snprintf(buf, len, "%s", uuid);
			return true;
		}
	}
	return false;
}

/*
 * The device under test: its UUID (CUDA_VISIBLE_DEVICES of every check), its
 * NVML index (libvgpu indexes limits by it: CUDA_DEVICE_MEMORY_LIMIT_<index>,
 * 0 on a node whose first GPU is tested) and L = min(1 GiB, memory / 4).
 */
int gc_describe_target(const struct gc_api *api, CUdevice dev, struct gc_target *t,
			   size_t *total)
{
	gc_uuid u;
	nvmlDevice_t h;
	unsigned int index = 0;
	CUresult r = api->cuDeviceTotalMem_v2 != NULL ? api->cuDeviceTotalMem_v2(total, dev)
						       : CUDA_ERROR_NOT_FOUND;
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "gpu_check: cannot read the memory size of device 0: "
			"cuDeviceTotalMem_v2 %s\n",
			api->cuDeviceTotalMem_v2 != NULL ? gc_cuerr(api, r) : "missing");
		return -1;
	}
	t->limit = *total / 4 / GC_MIB * GC_MIB;
	if (t->limit > 1024 * GC_MIB)
		t->limit = 1024 * GC_MIB;
	if ((api->cuDeviceGetUuid_v2 != NULL && api->cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) ||
	    (api->cuDeviceGetUuid != NULL && api->cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS))
		gc_format_uuid(&u, t->uuid, sizeof(t->uuid));
	else if (!uuid_from_nvml(api, t->uuid, sizeof(t->uuid))) {
		fprintf(stderr, "gpu_check: cannot tell the UUID of device 0 "
			"(no cuDeviceGetUuid, no NVML)\n");
		return -1;
	}
	if (gc_nvml_find(api, t->uuid, &h, &index) != 0)
		fprintf(stderr, "gpu_check: NVML does not list %s; assuming device index 0\n",
			t->uuid);
	t->index = (int)index;
	return 0;
}
