/*
 * nvml_api.h - the subset of NVML that libvgpu and its test stubs use,
 * declared from NVIDIA's public NVML reference (no NVML headers needed).
 */
#ifndef VGPU_NVML_API_H
#define VGPU_NVML_API_H

#include <stddef.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_UNKNOWN = 999,
};

#define NVML_DEVICE_UUID_BUFFER_SIZE 80

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

typedef struct {
	unsigned int version;       /* must be nvmlMemory_v2 */
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

/* NVML_STRUCT_VERSION(Memory, 2): struct size in the low bits, version in the top byte. */
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;   /* CPU timestamp in microseconds */
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlDeviceGetComputeRunningProcesses (v1) entries. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* _v2 and _v3 entries (nvmlProcessInfo_t); the instance ids are 0xFFFFFFFF without MIG. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
	unsigned int gpu;       /* percent of the sample period a kernel was executing */
	unsigned int memory;
} nvmlUtilization_t;

#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

/* nvmlDeviceGetRunningProcessDetailList (R550+): one list for a process mode. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct {
	unsigned int version;           /* nvmlProcessDetailList_v1 */
	unsigned int mode;              /* NVML_PROCESS_MODE_* */
	unsigned int numProcArrayEntries;
	nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_t;

enum { NVML_PROCESS_MODE_COMPUTE = 0, NVML_PROCESS_MODE_GRAPHICS = 1, NVML_PROCESS_MODE_MPS = 2,
       NVML_PROCESS_MODE_ALL = 3 };
#define nvmlProcessDetailList_v1 ((unsigned int)(sizeof(nvmlProcessDetailList_t) | (1u << 24)))

_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(nvmlProcessDetail_v1_t) == 32, "nvmlProcessDetail_v1_t layout");
_Static_assert(sizeof(nvmlProcessDetailList_t) == 24, "nvmlProcessDetailList_t layout");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t layout");

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
							  nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
					     nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *processSamplesCount,
					     unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
						   nvmlProcessDetailList_t *plist);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						      nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						      nvmlProcessInfo_t *infos);

#endif /* VGPU_NVML_API_H */
