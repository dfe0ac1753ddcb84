/*
 * nvml_stub.h - internals shared by the stub NVML's files (nvml_*.c), and
 * the parts of NVML beyond include/nvml_api.h (which holds what libvgpu
 * itself uses) that the stub answers, declared from NVIDIA's NVML API
 * reference and nvml.h's layouts.
 */
#ifndef VGPU_NVML_STUB_H
#define VGPU_NVML_STUB_H

#include <stdint.h>

#include "nvml_api.h"
#include "stub.h"

enum {
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_GPU_IS_LOST = 15,
};

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

typedef struct {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;       /* 16-bit device id << 16 | 16-bit vendor id */
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum {
	NVML_TOPOLOGY_INTERNAL = 0,
	NVML_TOPOLOGY_SINGLE = 10,
	NVML_TOPOLOGY_MULTIPLE = 20,
	NVML_TOPOLOGY_HOSTBRIDGE = 30,
	NVML_TOPOLOGY_NODE = 40,
	NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;
typedef enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1
#define NVML_NVLINK_MAX_LINKS 36
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData;   /* the Xid of nvmlEventTypeXidCriticalError */
	unsigned int gpuInstanceId;     /* 0xFFFFFFFF when not attributable to one */
	unsigned int computeInstanceId;
} nvmlEventData_t;
/* Every event type of nvml.h's nvmlEventTypeAll. */
#define STUB_EVENT_TYPES_ALL UINT64_C(0xFFFF)

/* MIG management's objects, never handed out here (the fake driver does not partition). */
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");

/* The helpers below are the library's own, not NVML entry points: not exported. */
#define STUB_HIDDEN __attribute__((visibility("hidden")))

/* A device handle: mig 0 for a GPU, k + 1 for MIG instance k of GPU `index` (local mode). */
struct nvmlDevice_st { unsigned int index; unsigned int mig; };

/* Whether nvmlInit has succeeded more often than nvmlShutdown was called. */
STUB_HIDDEN int stub_nvml_inited(void);
/* The GPU index of a valid GPU handle (not a MIG one), or -1. */
STUB_HIDDEN int stub_nvml_gpu(nvmlDevice_t device);
/* The handle of GPU index, and of MIG instance k of GPU index (local mode). */
STUB_HIDDEN nvmlDevice_t stub_nvml_handle(int index);
STUB_HIDDEN nvmlDevice_t stub_nvml_mig_handle(int index, int k);
/* Whether device is one of this library's handles, GPU or MIG. */
STUB_HIDDEN int stub_nvml_valid(nvmlDevice_t device);
/*
 * Check that NVML is initialised and device is one of its GPU handles:
 * NVML_SUCCESS with *index set, or the error the caller returns.
 */
STUB_HIDDEN nvmlReturn_t stub_nvml_check(nvmlDevice_t device, int *index);
/*
 * stub_nvml_check for the two devices of a pair query (topology, P2P): a
 * MIG instance is an invalid argument there rather than not supported.
 */
STUB_HIDDEN nvmlReturn_t stub_nvml_check_pair(nvmlDevice_t device1, nvmlDevice_t device2, int *i, int *j);
/* The facts of GPU index: NVML_SUCCESS, or NVML_ERROR_UNKNOWN when the daemon does not answer. */
STUB_HIDDEN nvmlReturn_t stub_nvml_facts(int index, struct stub_facts *f);
/* Copies s into out[length]: NVML_ERROR_INSUFFICIENT_SIZE when it does not fit. */
STUB_HIDDEN nvmlReturn_t stub_nvml_string(char *out, unsigned int length, const char *s);

#endif /* VGPU_NVML_STUB_H */
