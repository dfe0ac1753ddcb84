/*
 * nvml_topology.c - the stub NVML's topology and NVLink answers (NVML API
 * reference, https://docs.nvidia.com/deploy/nvml-api/: "Topology Queries"
 * and "NvLink Methods"). In remote mode the PCIe levels are the fake
 * driver's (TOPO, from the cards' NUMA nodes, host bridges and PCIe
 * switches) and the NVLinks its configuration's (INFO); in local mode every
 * card sits on the one NUMA node of a one-socket server, without NVLink.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "nvml_stub.h"

/* The PCIe common ancestor of GPUs i and j, or -1 when the daemon does not answer. */
static int level(int i, int j)
{
	if (stub_remote())
		return stub_remote_topo(i, j);
	return i == j ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_NODE;
}

/*
 * nvmlDeviceGetTopologyCommonAncestor: NVML_ERROR_UNKNOWN when "an error
 * has occurred in underlying topology discovery" (no answer). The page does
 * not say what one device twice gives; it is one board here,
 * NVML_TOPOLOGY_INTERNAL.
 */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
						 nvmlGpuTopologyLevel_t *pathInfo)
{
	int i, j;
	nvmlReturn_t rc = stub_nvml_check_pair(device1, device2, &i, &j);
	if (rc != NVML_SUCCESS)
		return rc;
	if (pathInfo == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	int l = level(i, j);
	if (l < 0)
		return NVML_ERROR_UNKNOWN;
	*pathInfo = (nvmlGpuTopologyLevel_t)l;
	return NVML_SUCCESS;
}

/* One of nvmlGpuTopologyLevel_t's values: 0, 10, ... 50. */
static int valid_level(unsigned int l)
{
	return l <= NVML_TOPOLOGY_SYSTEM && l % 10 == 0;
}

/*
 * nvmlDeviceGetTopologyNearestGpus: the other GPUs "at a specific
 * interconnectivity level", that level or nearer, among those this process
 * can talk to. "count: When zero, is set to the number of matching GPUs
 * such that deviceArray can be malloc'd. When non-zero, deviceArray will be
 * filled with count number of device handles"; NVML_ERROR_INVALID_ARGUMENT
 * "if device, level, or count is invalid, or deviceArray is NULL with a
 * non-zero count".
 */
nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device, nvmlGpuTopologyLevel_t lvl, unsigned int *count,
					      nvmlDevice_t *deviceArray)
{
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc != NVML_SUCCESS)
		return rc == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_INVALID_ARGUMENT : rc;
	if (count == NULL || !valid_level((unsigned)lvl) || (*count != 0 && deviceArray == NULL))
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned int n = 0;
	for (int j = 0; j < vgpuStubShared()->ndev; j++) {
		if (j == i || stub_remote_open(j) != 0)
			continue;
		int l = level(i, j);
		if (l < 0)
			return NVML_ERROR_UNKNOWN;
		if (l > (int)lvl)
			continue;
		if (*count != 0 && n < *count)
			deviceArray[n] = stub_nvml_handle(j);
		n++;
	}
	if (*count == 0 || n < *count)
		*count = n;
	return NVML_SUCCESS;
}

/*
 * The link's facts: NVML_ERROR_NOT_SUPPORTED "if the device doesn't
 * support this feature" (no NVLink), NVML_ERROR_INVALID_ARGUMENT "if device
 * or link is invalid" (beyond the card's links) or out is NULL.
 */
static nvmlReturn_t nvlink(nvmlDevice_t device, unsigned int link, const void *out, struct stub_facts *f)
{
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc != NVML_SUCCESS)
		return rc;
	if (out == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((rc = stub_nvml_facts(i, f)) != NVML_SUCCESS)
		return rc;
	if (f->nlinks == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	return link < (unsigned)f->nlinks ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* nvmlDeviceGetNvLinkState: the configured links are the card's links, all active. */
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
	struct stub_facts f;
	nvmlReturn_t rc = nvlink(device, link, isActive, &f);
	if (rc == NVML_SUCCESS)
		*isActive = NVML_FEATURE_ENABLED;
	return rc;
}

/*
 * nvmlDeviceGetNvLinkRemotePciInfo_v2: the remote end's bus id; "Note:
 * pciSubSystemId is not filled in this function and is indeterminate"
 * (zero here, as is the remote's device id, which the link does not carry).
 */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
	struct stub_facts f;
	unsigned dom, bus, dev, fn;
	nvmlReturn_t rc = nvlink(device, link, pci, &f);
	if (rc != NVML_SUCCESS)
		return rc;
	if (sscanf(f.links[link].bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return NVML_ERROR_UNKNOWN;
	memset(pci, 0, sizeof(*pci));
	snprintf(pci->busId, sizeof(pci->busId), "%s", f.links[link].bus_id);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", dom & 0xffff, bus, dev, fn);
	pci->domain = dom;
	pci->bus = bus;
	pci->device = dev;
	return NVML_SUCCESS;
}

/* nvmlDeviceGetNvLinkRemoteDeviceType: a GPU or an NVSwitch, as configured. */
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
						 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
	struct stub_facts f;
	nvmlReturn_t rc = nvlink(device, link, pNvLinkDeviceType, &f);
	if (rc == NVML_SUCCESS)
		*pNvLinkDeviceType = f.links[link].to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH
							      : NVML_NVLINK_DEVICE_TYPE_GPU;
	return rc;
}
