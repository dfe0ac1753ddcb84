/*
 * device.c - maps CUDA device ordinals to container device indices.
 *
 * Limits (CUDA_DEVICE_MEMORY_LIMIT_<i>) and region arrays are indexed by the
 * container's device index, which is the NVML index. The two APIs order
 * devices differently: NVML by PCI bus id, CUDA fastest first unless
 * CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA programming guide, "CUDA Environment
 * Variables"), with CUDA_VISIBLE_DEVICES applied on top, its indices taken
 * in CUDA's order. Neither index says which physical device a CUDA ordinal
 * is; the UUID does. So each ordinal is mapped through cuDeviceGetUuid_v2
 * (which returns the MIG instance's UUID in MIG mode, per the CUDA Driver API
 * reference) to the NVML device with that UUID, or to the GPU that holds the
 * MIG instance with that UUID (nvmlDeviceGetHandleByUUID accepts both).
 *
 * The map is built once the driver can enumerate devices (after cuInit).
 * Before that, or with a driver that cannot say a device's UUID, the
 * CUDA_VISIBLE_DEVICES entry for the ordinal is used (an index, or a GPU- or
 * MIG- UUID prefix). An ordinal nothing resolves is given the device with
 * the smallest memory limit, with a warning: a guess must never loosen a
 * limit.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"
#include "symbols.h"

static int cuda_to_idx[VGPU_MAX_DEVICES];
static int map_built;           /* atomic: cuda_to_idx is final */
static pthread_mutex_t map_mu = PTHREAD_MUTEX_INITIALIZER;

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

int vgpu_nvml_count(void)
{
	pthread_once(&nvml_once, nvml_open);
	return (int)__atomic_load_n(&nvml_count, __ATOMIC_ACQUIRE);
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

/* The NVML index of `h`, or of the GPU holding MIG device `h`; -1 if neither. */
static int index_of_handle(nvmlDevice_t h, bool mig)
{
	unsigned int idx;
	nvmlDevice_t parent;
	if (mig && REAL(nvmlDeviceGetDeviceHandleFromMigDeviceHandle) != NULL &&
	    REAL(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(h, &parent) == NVML_SUCCESS)
		h = parent;
	if (REAL(nvmlDeviceGetIndex) == NULL || REAL(nvmlDeviceGetIndex)(h, &idx) != NVML_SUCCESS ||
	    idx >= VGPU_MAX_DEVICES)
		return -1;
	return (int)idx;
}

/* NVML index of the GPU whose UUID (GPU- or MIG-) starts with `prefix`; -1 if none. */
static int uuid_index(const char *prefix)
{
	bool mig = strncmp(prefix, "MIG-", 4) == 0;
	nvmlDevice_t h;
	if (vgpu_nvml_device(0) == NULL)
		return -1;
	/* A whole UUID: NVML finds GPUs and MIG instances alike. */
	if (REAL(nvmlDeviceGetHandleByUUID) != NULL &&
	    REAL(nvmlDeviceGetHandleByUUID)(prefix, &h) == NVML_SUCCESS)
		return index_of_handle(h, mig);
	/* A prefix (CUDA_VISIBLE_DEVICES allows them) of a GPU UUID. */
	for (unsigned int i = 0; !mig && REAL(nvmlDeviceGetUUID) != NULL && i < nvml_count; i++) {
		char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (nvml_dev[i] != NULL &&
		    REAL(nvmlDeviceGetUUID)(nvml_dev[i], uuid, sizeof(uuid)) == NVML_SUCCESS &&
		    strncmp(uuid, prefix, strlen(prefix)) == 0)
			return (int)i;
	}
	return -1;
}

/* The container index CUDA_VISIBLE_DEVICES names for ordinal k, -1 if it does not. */
static int cvd_index(int k)
{
	if (vgpu_cfg.cvd_count < 0)
		return k;       /* every device visible, and CUDA order assumed to be NVML's */
	if (k >= vgpu_cfg.cvd_count)
		return -1;
	const char *entry = vgpu_cfg.cvd[k];
	if (all_digits(entry)) {
		long v = strtol(entry, NULL, 10);
		return v < VGPU_MAX_DEVICES ? (int)v : -1;
	}
	if (strncmp(entry, "GPU-", 4) == 0 || strncmp(entry, "MIG-", 4) == 0)
		return uuid_index(entry);
	return -1;
}

/* The device with the smallest memory limit: the guess that never loosens one. */
static int tightest(void)
{
	int best = 0;
	for (int i = 0; i < VGPU_MAX_DEVICES; i++)
		if (vgpu_cfg.mem_limit[i] != 0 &&
		    (vgpu_cfg.mem_limit[best] == 0 || vgpu_cfg.mem_limit[i] < vgpu_cfg.mem_limit[best]))
			best = i;
	return best;
}

static void format_uuid(const unsigned char b[16], const char *prefix, char *out, size_t len)
{
	snprintf(out, len,
		 "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/* Ordinal k's container index from its UUID; -1 if the driver or NVML cannot say. */
static int uuid_of_ordinal(int k)
{
	CUdevice dev;
	CUuuid u;
	char s[48];
	if (REAL(cuDeviceGet) == NULL || REAL(cuDeviceGet)(&dev, k) != CUDA_SUCCESS)
		return -1;
	CUresult rc = REAL(cuDeviceGetUuid_v2) != NULL ? REAL(cuDeviceGetUuid_v2)(&u, dev)
			: REAL(cuDeviceGetUuid) != NULL ? REAL(cuDeviceGetUuid)(&u, dev)
			: CUDA_ERROR_NOT_SUPPORTED;
	if (rc != CUDA_SUCCESS)
		return -1;
	format_uuid((const unsigned char *)u.bytes, "GPU-", s, sizeof(s));
	int idx = uuid_index(s);
	if (idx < 0) {
		format_uuid((const unsigned char *)u.bytes, "MIG-", s, sizeof(s));
		idx = uuid_index(s);
	}
	return idx;
}

/* Builds the map once the driver enumerates devices; false before cuInit. */
static bool build_map(void)
{
	int n = 0;
	if (REAL(cuDeviceGetCount) == NULL || REAL(cuDeviceGetCount)(&n) != CUDA_SUCCESS)
		return false;
	for (int k = 0; k < VGPU_MAX_DEVICES; k++) {
		int idx = k < n ? uuid_of_ordinal(k) : -1;
		if (idx < 0)
			idx = cvd_index(k);
		if (idx < 0 && k < n) {
			idx = tightest();
			VGPU_LOG(VGPU_LOG_WARN, "CUDA device %d: neither its UUID nor CUDA_VISIBLE_DEVICES "
				 "names an NVML device; applying device %d's limits", k, idx);
		}
		cuda_to_idx[k] = idx < 0 ? k : idx;
	}
	return true;
}

int vgpu_dev_index(CUdevice dev)
{
	if (dev < 0 || dev >= VGPU_MAX_DEVICES)
		return -1;
	if (VGPU_LIKELY(__atomic_load_n(&map_built, __ATOMIC_ACQUIRE)))
		return cuda_to_idx[dev];
	pthread_mutex_lock(&map_mu);
	if (!map_built && build_map())
		__atomic_store_n(&map_built, 1, __ATOMIC_RELEASE);
	int idx = map_built ? cuda_to_idx[dev] : cvd_index(dev);
	pthread_mutex_unlock(&map_mu);
	return idx < 0 ? tightest() : idx;
}

int vgpu_current_dev(CUdevice *dev, int *idx)
{
	if (REAL(cuCtxGetDevice) == NULL || REAL(cuCtxGetDevice)(dev) != CUDA_SUCCESS)
		return -1;
	*idx = vgpu_dev_index(*dev);
	return *idx >= 0 ? 0 : -1;
}
