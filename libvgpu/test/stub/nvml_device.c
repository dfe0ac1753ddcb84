/*
 * nvml_device.c - the stub NVML's answers about one device: name, minor
 * number, PCI information and look-up by PCI bus id, compute capability,
 * NUMA node and CPU/memory affinity, and nvmlErrorString. In remote mode
 * the facts are the fake driver's (DEV and INFO, from its configuration),
 * so a node agent's view of the cards and the driver's come from one place.
 * Each function cites its page of the NVML API reference
 * (https://docs.nvidia.com/deploy/nvml-api/), "Device Queries" unless said.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "nvml_stub.h"

/*
 * nvmlDeviceGetName: "It will not exceed 96 characters in length";
 * NVML_ERROR_INSUFFICIENT_SIZE "if length is too small".
 */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc != NVML_SUCCESS)
		return rc;
	if (name == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	return stub_nvml_string(name, length, stub_remote() ? stub_remote_name(i) : "vGPU Stub Device");
}

/* nvmlDeviceGetMinorNumber: the device node is /dev/nvidia[minor number]. */
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && minorNumber == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && (rc = stub_nvml_facts(i, &f)) == NVML_SUCCESS)
		*minorNumber = (unsigned int)f.minor;
	return rc;
}

/*
 * nvmlDeviceGetPciInfo_v3: busId in NVML_DEVICE_PCI_BUS_ID_FMT
 * ("%08X:%02X:%02X.0"), busIdLegacy in NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT
 * ("%04X:%02X:%02X.0"), the ids as the fake driver's configuration has them.
 */
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	struct stub_facts f;
	unsigned dom, bus, dev, fn;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && pci == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS || (rc = stub_nvml_facts(i, &f)) != NVML_SUCCESS)
		return rc;
	if (sscanf(f.bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return NVML_ERROR_UNKNOWN;
	memset(pci, 0, sizeof(*pci));
	snprintf(pci->busId, sizeof(pci->busId), "%s", f.bus_id);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", dom & 0xffff, bus, dev, fn);
	pci->domain = dom;
	pci->bus = bus;
	pci->device = dev;
	pci->pciDeviceId = f.pci_device_id;
	pci->pciSubSystemId = f.pci_subsystem_id;
	return NVML_SUCCESS;
}

/*
 * A PCI bus id in one of the forms nvmlDeviceGetHandleByPciBusId_v2
 * accepts, "all numbers in hexadecimal": domain:bus:device.function,
 * domain:bus:device, or bus:device.function (domain 0).
 */
static int parse_bus_id(const char *s, unsigned v[3])
{
	unsigned fn;
	int colons = 0;
	char end;
	for (const char *c = s; *c != '\0'; c++)
		colons += *c == ':';
	if (colons == 2 && (sscanf(s, "%x:%x:%x.%x%c", &v[0], &v[1], &v[2], &fn, &end) == 4 ||
			    sscanf(s, "%x:%x:%x%c", &v[0], &v[1], &v[2], &end) == 3))
		return 0;
	v[0] = 0;
	if (colons == 1 && sscanf(s, "%x:%x.%x%c", &v[1], &v[2], &fn, &end) == 3)
		return 0;
	return -1;
}

/*
 * nvmlDeviceGetHandleByPciBusId_v2: NVML_ERROR_NOT_FOUND "if pciBusId does
 * not match a valid device on the system", NVML_ERROR_NO_PERMISSION "if the
 * user doesn't have permission to talk to this device".
 */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	unsigned want[3], have[3];
	struct stub_facts f;
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (pciBusId == NULL || device == NULL || parse_bus_id(pciBusId, want) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < vgpuStubShared()->ndev; i++) {
		/* DEV's bus id, which any process may read: no INFO, which needs the device. */
		if (stub_remote()) {
			if (stub_remote_bus_id(i, f.bus_id, sizeof(f.bus_id)) != 0)
				return NVML_ERROR_UNKNOWN;
		} else if (stub_facts(i, &f) != 0) {
			return NVML_ERROR_UNKNOWN;
		}
		if (parse_bus_id(f.bus_id, have) != 0 || memcmp(want, have, sizeof(want)) != 0)
			continue;
		switch (stub_remote_open(i)) {
		case 0:
			*device = stub_nvml_handle(i);
			return NVML_SUCCESS;
		case -1:
			return NVML_ERROR_NO_PERMISSION;
		}
		return NVML_ERROR_UNKNOWN;
	}
	return NVML_ERROR_NOT_FOUND;
}

/* nvmlDeviceGetCudaComputeCapability: "For all products." */
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && (major == NULL || minor == NULL))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && (rc = stub_nvml_facts(i, &f)) == NVML_SUCCESS) {
		*major = f.cc_major;
		*minor = f.cc_minor;
	}
	return rc;
}

/*
 * nvmlDeviceGetNumaNodeId: "This only applies to platforms where the GPUs
 * are NUMA nodes"; NVML_ERROR_NOT_SUPPORTED "if request is not supported on
 * the current platform". The fake driver's cards are PCIe cards, whose node
 * is their memory affinity's.
 */
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && node == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	return rc == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : rc;
}

/* Fills set[size] with the bits of mask (64 per unsigned long). */
static void fill_mask(unsigned long *set, unsigned int size, const uint64_t *mask, unsigned int words)
{
	for (unsigned int w = 0; w < size; w++)
		set[w] = w < words ? (unsigned long)mask[w] : 0;
}

/*
 * nvmlDeviceGetMemoryAffinity: a bitmask of NUMA nodes, 64 per unsigned
 * long; NVML_ERROR_INVALID_ARGUMENT "if device is invalid, nodeSetSize == 0,
 * nodeSet is NULL or scope is invalid". With one NUMA node per socket here,
 * NVML_AFFINITY_SCOPE_SOCKET names the same node ("If requested scope is not
 * applicable to the target topology, the API will fall back to reporting
 * the memory affinity for the immediate non-I/O ancestor"). A card with no
 * NUMA node (the platform reports none) does not support the query.
 */
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long *nodeSet,
					 nvmlAffinityScope_t scope)
{
	struct stub_facts f;
	uint64_t mask[STUB_MAX_CPUS / 64] = {0};
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && (nodeSetSize == 0 || nodeSet == NULL ||
				   (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET)))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS || (rc = stub_nvml_facts(i, &f)) != NVML_SUCCESS)
		return rc;
	if (f.numa < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	if (f.numa < STUB_MAX_CPUS)
		mask[f.numa / 64] = UINT64_C(1) << (f.numa % 64);
	fill_mask(nodeSet, nodeSetSize, mask, STUB_MAX_CPUS / 64);
	return NVML_SUCCESS;
}

/*
 * nvmlDeviceGetCpuAffinityWithinScope: the ideal CPUs, 64 per unsigned
 * long; NVML_ERROR_INVALID_ARGUMENT "if device is invalid, cpuSetSize == 0,
 * cpuSet is NULL or scope is invalid"; NVML_ERROR_NOT_SUPPORTED "if the
 * device does not support this feature" (no affinity configured).
 */
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet,
						 nvmlAffinityScope_t scope)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && (cpuSetSize == 0 || cpuSet == NULL ||
				   (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET)))
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc != NVML_SUCCESS || (rc = stub_nvml_facts(i, &f)) != NVML_SUCCESS)
		return rc;
	if (f.ncpus == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	fill_mask(cpuSet, cpuSetSize, f.cpus, STUB_MAX_CPUS / 64);
	return NVML_SUCCESS;
}

/* nvmlDeviceGetCpuAffinity: "equivalent to ... WithinScope with NVML_AFFINITY_SCOPE_NODE". */
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet)
{
	return nvmlDeviceGetCpuAffinityWithinScope(device, cpuSetSize, cpuSet, NVML_AFFINITY_SCOPE_NODE);
}

/*
 * nvmlErrorString ("Error reporting"): "String representation of the
 * error". The texts are NVML's, as nvidia-smi prints them. Needed by every
 * Go caller: go-nvml's Return.Error calls it once the library is loaded, so
 * any NVML error logged or wrapped with %w reaches it.
 */
const char *nvmlErrorString(nvmlReturn_t result)
{
	static const struct { nvmlReturn_t rc; const char *text; } texts[] = {
		{NVML_SUCCESS, "Success"},
		{NVML_ERROR_UNINITIALIZED, "Uninitialized"},
		{NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
		{NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
		{NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
		{NVML_ERROR_NOT_FOUND, "Not Found"},
		{NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
		{NVML_ERROR_TIMEOUT, "Timeout"},
		{NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
		{NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
		{NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
		{NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
		{NVML_ERROR_UNKNOWN, "Unknown Error"},
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (texts[i].rc == result)
			return texts[i].text;
	return "Unknown Error";
}
