/*
 * device.c - maps CUDA device ordinals to container device indices.
 *
 * Limits (CUDA_DEVICE_MEMORY_LIMIT_<i>) and region arrays are indexed by the
 * container's device index, which is the NVML index: NVML ignores
 * CUDA_VISIBLE_DEVICES, the CUDA driver does not. So CUDA ordinal k is entry
 * k of CUDA_VISIBLE_DEVICES, given either as an index or as a UUID (prefix).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"
#include "symbols.h"

static int cuda_to_idx[VGPU_MAX_DEVICES];
static pthread_once_t map_once = PTHREAD_ONCE_INIT;

static nvmlDevice_t nvml_dev[VGPU_MAX_DEVICES];
static unsigned int nvml_count;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_open(void)
{
	if (!vgpu_nvml_loaded())
		return;
	nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
	if (REAL(nvmlInit_v2) != NULL)
		rc = REAL(nvmlInit_v2)();
	else if (REAL(nvmlInit) != NULL)
		rc = REAL(nvmlInit)();
	if (rc != NVML_SUCCESS || REAL(nvmlDeviceGetCount_v2) == NULL ||
	    REAL(nvmlDeviceGetHandleByIndex_v2) == NULL) {
		VGPU_LOG(VGPU_LOG_INFO, "NVML unavailable (%d); NVML-based features are off", rc);
		return;
	}
	unsigned int count = 0;
	if (REAL(nvmlDeviceGetCount_v2)(&count) != NVML_SUCCESS)
		return;
	if (count > VGPU_MAX_DEVICES)
		count = VGPU_MAX_DEVICES;
	for (unsigned int i = 0; i < count; i++)
		if (REAL(nvmlDeviceGetHandleByIndex_v2)(i, &nvml_dev[i]) != NVML_SUCCESS)
			nvml_dev[i] = NULL;
	__atomic_store_n(&nvml_count, count, __ATOMIC_RELEASE);
}

nvmlDevice_t vgpu_nvml_device(int idx)
{
	pthread_once(&nvml_once, nvml_open);
	if (idx < 0 || (unsigned)idx >= __atomic_load_n(&nvml_count, __ATOMIC_ACQUIRE))
		return NULL;
	return nvml_dev[idx];
}

static int all_digits(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* Finds the NVML device whose UUID starts with `prefix` (CUDA accepts prefixes). */
static int uuid_index(const char *prefix)
{
	if (vgpu_nvml_device(0) == NULL || REAL(nvmlDeviceGetUUID) == NULL)
		return -1;
	for (unsigned int i = 0; i < nvml_count; i++) {
		char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (nvml_dev[i] == NULL ||
		    REAL(nvmlDeviceGetUUID)(nvml_dev[i], uuid, sizeof(uuid)) != NVML_SUCCESS)
			continue;
		if (strncmp(uuid, prefix, strlen(prefix)) == 0)
			return (int)i;
	}
	return -1;
}

static void build_map(void)
{
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		cuda_to_idx[i] = i;
	if (vgpu_cfg.cvd_count < 0)
		return;
	for (int i = 0; i < vgpu_cfg.cvd_count; i++) {
		const char *entry = vgpu_cfg.cvd[i];
		int idx = -1;
		if (all_digits(entry)) {
			long v = strtol(entry, NULL, 10);
			idx = v < VGPU_MAX_DEVICES ? (int)v : -1;
		} else if (strncmp(entry, "GPU-", 4) == 0) {
			idx = uuid_index(entry);
		}
		if (idx < 0) {
			/* Better to apply a limit to a guessed device than to none. */
			VGPU_LOG(VGPU_LOG_WARN,
				 "CUDA_VISIBLE_DEVICES entry \"%s\" not resolved; assuming device %d",
				 entry, i);
			idx = i;
		}
		cuda_to_idx[i] = idx;
	}
}

int vgpu_dev_index(CUdevice dev)
{
	if (dev < 0 || dev >= VGPU_MAX_DEVICES)
		return -1;
	pthread_once(&map_once, build_map);
	return cuda_to_idx[dev];
}

int vgpu_current_dev(CUdevice *dev, int *idx)
{
	if (REAL(cuCtxGetDevice) == NULL || REAL(cuCtxGetDevice)(dev) != CUDA_SUCCESS)
		return -1;
	*idx = vgpu_dev_index(*dev);
	return *idx >= 0 ? 0 : -1;
}
