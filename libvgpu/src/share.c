/*
 * share.c - memory a process hands to others: CUDA IPC handles
 * (cuIpcGetMemHandle) and VMM shareable handles
 * (cuMemExportToShareableHandle, POSIX descriptors NCCL >= 2.19 passes
 * between its ranks by default).
 *
 * The rule: a byte is counted once, on the process (and so the container)
 * that allocated it, for as long as the driver keeps it.
 *  - The importer is never charged: cuIpcOpenMemHandle,
 *    cuMemImportFromShareableHandle and the cuMemMap of an imported handle
 *    pass through (vmm.c tracks only handles this process created), in the
 *    same container or another.
 *  - The exporter stays charged while anyone maps it. The driver keeps an
 *    exported allocation alive while an importer maps it (cuMemRelease's
 *    rule holds across processes for shareable handles; for IPC handles the
 *    reference calls a free before the importers' close undefined, and a
 *    driver keeps the memory), but no call tells the exporter when the last
 *    importer let go. So once this process exported an allocation, its
 *    free keeps the charge until the process exits (the region drops a
 *    dead process's usage): never under the share while the memory may be
 *    on the device, at the price of counting memory the importers already
 *    released until then (README, "Memory paths").
 */
#define _GNU_SOURCE
#include "hooks.h"

void vgpu_share_linger(const struct vgpu_entry *e)
{
	VGPU_LOG(VGPU_LOG_INFO,
		 "device %d: %llu exported bytes freed; they stay counted until this process exits "
		 "(another process may still map them)",
		 e->idx, (unsigned long long)e->bytes);
}

VGPU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	VGPU_ENTER_CUDA(cuIpcGetMemHandle);
	CUresult res = REAL(cuIpcGetMemHandle)(pHandle, dptr);
	if (res == CUDA_SUCCESS && vgpu_counting())
		vgpu_ledger_set_flags(VGPU_K_DEVPTR, dptr, VGPU_F_EXPORTED);
	return res;
}

VGPU_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
						  CUmemGenericAllocationHandle handle,
						  int handleType, unsigned long long flags)
{
	VGPU_ENTER_CUDA(cuMemExportToShareableHandle);
	CUresult res = REAL(cuMemExportToShareableHandle)(shareableHandle, handle, handleType, flags);
	if (res == CUDA_SUCCESS && vgpu_counting())
		vgpu_ledger_set_flags(VGPU_K_VMM, handle, VGPU_F_EXPORTED);
	return res;
}
