/*
 * nvml_p2p.c - the stub NVML's peer-to-peer status (NVML API reference,
 * "Topology Queries": nvmlDeviceGetP2PStatus). It agrees with the stub
 * driver's cuDeviceCanAccessPeer (cuda_share.c): two cards joined by NVLink
 * (VGPU_STUB_NVLINK=1 in local mode, the daemon's configuration in remote
 * mode) answer NVML_P2P_STATUS_OK for every capability; without NVLink the
 * stub models a PCIe topology that does not allow peer access
 * (NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED), and the NVLink capability is
 * NVML_P2P_STATUS_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <string.h>

#include "nvml_stub.h"

/* nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t, as nvml.h numbers them. */
enum { P2P_READ = 0, P2P_WRITE = 1, P2P_NVLINK = 2, P2P_ATOMICS = 3, P2P_PCI = 4, P2P_UNKNOWN = 5 };
enum { P2P_OK = 0, P2P_IOH_TOPOLOGY_NOT_SUPPORTED = 3, P2P_NOT_SUPPORTED = 5 };

static int linked(int i, int j)
{
	struct stub_facts f, o;
	if (i == j || stub_nvml_facts(i, &f) != NVML_SUCCESS || stub_nvml_facts(j, &o) != NVML_SUCCESS)
		return 0;
	for (int k = 0; k < f.nlinks; k++)
		if ((f.links[k].to_switch && o.nlinks > 0) || strcmp(f.links[k].bus_id, o.bus_id) == 0)
			return 1;
	return 0;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex,
				    int *p2pStatus)
{
	int i, j;
	nvmlReturn_t rc = stub_nvml_check_pair(device1, device2, &i, &j);
	if (rc != NVML_SUCCESS)
		return rc;
	if (p2pStatus == NULL || p2pIndex < P2P_READ || p2pIndex >= P2P_UNKNOWN)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (linked(i, j))
		*p2pStatus = P2P_OK;
	else
		*p2pStatus = p2pIndex == P2P_NVLINK ? P2P_NOT_SUPPORTED : P2P_IOH_TOPOLOGY_NOT_SUPPORTED;
	return NVML_SUCCESS;
}
