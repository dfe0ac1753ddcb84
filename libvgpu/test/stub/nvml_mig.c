/*
 * nvml_mig.c - the stub NVML's MIG answers ("Multi Instance GPU Management"
 * in the NVML API reference, https://docs.nvidia.com/deploy/nvml-api/).
 *
 * A card's MIG capability is the fake driver's configuration (remote mode)
 * or VGPU_STUB_MIG (local mode, where that GPU is in MIG mode with two
 * instances, MIG handles included, for libvgpu's tests). A card that is not
 * MIG capable answers NVML_ERROR_NOT_SUPPORTED, as documented; a capable
 * card of the fake driver reports MIG disabled. The fake driver does not
 * partition: no GPU instance profile, GPU instance or compute instance
 * exists, and switching MIG mode answers NVML_ERROR_NOT_SUPPORTED, the
 * answer that stops a caller before it creates instances (the reference
 * reserves it for devices without MIG support; this is the one departure).
 */
#define _GNU_SOURCE
#include <stddef.h>

#include "nvml_stub.h"

/* The card's MIG capability, and whether MIG is on (local mode's VGPU_STUB_MIG card). */
static nvmlReturn_t mig_state(nvmlDevice_t device, int *capable, int *enabled)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc != NVML_SUCCESS || (rc = stub_nvml_facts(i, &f)) != NVML_SUCCESS)
		return rc;
	*capable = f.mig_capable;
	*enabled = f.mig_capable && !stub_remote() && i == stub_mig_phys();
	return NVML_SUCCESS;
}

/* nvmlDeviceGetMigMode: NVML_ERROR_NOT_SUPPORTED "If device doesn't support MIG mode". */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	int capable, enabled;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	if (currentMode == NULL || pendingMode == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!capable)
		return NVML_ERROR_NOT_SUPPORTED;
	*currentMode = *pendingMode = enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	return NVML_SUCCESS;
}

/* nvmlDeviceGetMaxMigDeviceCount: "Returns zero if MIG is not supported or enabled." */
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	int capable, enabled;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	if (count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = enabled ? 2 : 0;
	return NVML_SUCCESS;
}

/*
 * nvmlDeviceGetMigDeviceHandleByIndex: NVML_ERROR_NOT_SUPPORTED "if this
 * query is not supported by the device", NVML_ERROR_NOT_FOUND "if no valid
 * MIG device was found at index".
 */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
	int capable, enabled;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	if (migDevice == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!capable)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!enabled || index >= 2)
		return NVML_ERROR_NOT_FOUND;
	*migDevice = stub_nvml_mig_handle((int)device->index, (int)index);
	return NVML_SUCCESS;
}

/* nvmlDeviceIsMigDeviceHandle: whether the handle is a MIG device's. */
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || isMigDevice == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*isMigDevice = device->mig != 0;
	return NVML_SUCCESS;
}

/*
 * nvmlDeviceGetGpuInstanceId, "for the given MIG device handle": instance k
 * of local mode's MIG card is GPU instance k + 1; a GPU's handle gets
 * NVML_ERROR_NOT_SUPPORTED, "if this query is not supported by the device".
 */
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (!stub_nvml_valid(device) || id == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (device->mig == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*id = device->mig;
	return NVML_SUCCESS;
}

/* nvmlDeviceSetMigMode: see the file's comment; INVALID_ARGUMENT for a bad mode. */
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus)
{
	int capable, enabled;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	if (activationStatus == NULL || (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE))
		return NVML_ERROR_INVALID_ARGUMENT;
	return NVML_ERROR_NOT_SUPPORTED;
}

/*
 * nvmlDeviceGetGpuInstanceProfileInfo: NVML_ERROR_NOT_SUPPORTED "If device
 * doesn't support MIG or profile isn't supported": no profile is.
 */
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile, void *info)
{
	int capable, enabled;
	(void)profile;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	return info == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
}

/* nvmlDeviceGetGpuInstances: NVML_ERROR_NOT_SUPPORTED "If device doesn't have MIG mode enabled". */
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstances,
				       unsigned int *count)
{
	int capable, enabled;
	(void)profileId;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	return gpuInstances == NULL || count == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
}

/* nvmlDeviceCreateGpuInstance: NVML_ERROR_NOT_SUPPORTED "If device doesn't have MIG mode enabled". */
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstance)
{
	int capable, enabled;
	(void)profileId;
	nvmlReturn_t rc = mig_state(device, &capable, &enabled);
	if (rc != NVML_SUCCESS)
		return rc;
	return gpuInstance == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
}

/*
 * GPU and compute instances: none is ever handed out, so every handle is
 * invalid (NVML_ERROR_INVALID_ARGUMENT "If gpuInstance ... invalid").
 */
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, void *info)
{
	(void)gpuInstance, (void)info;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
							  unsigned int engProfile, void *info)
{
	(void)gpuInstance, (void)profile, (void)engProfile, (void)info;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
						nvmlComputeInstance_t *computeInstances, unsigned int *count)
{
	(void)gpuInstance, (void)profileId, (void)computeInstances, (void)count;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
						  nvmlComputeInstance_t *computeInstance)
{
	(void)gpuInstance, (void)profileId, (void)computeInstance;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
	(void)gpuInstance;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
	(void)computeInstance;
	return stub_nvml_inited() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
}
