/*
 * hooks.h - helpers shared by the hook families (memory.c, array.c, vmm.c,
 * pool.c, context.c, launch.c, nvml.c).
 */
#ifndef VGPU_HOOKS_H
#define VGPU_HOOKS_H

#include "internal.h"
#include "log.h"
#include "symbols.h"

/*
 * Every CUDA hook starts here: one-time init, the real driver bound, and the
 * answer a driver without this entry point would give if it is missing.
 */
#define VGPU_ENTER_CUDA(name)                                                  \
	do {                                                                   \
		vgpu_init();                                                   \
		vgpu_symbols_cuda();                                           \
		if (VGPU_UNLIKELY(REAL(name) == NULL))                         \
			return CUDA_ERROR_NOT_SUPPORTED;                       \
	} while (0)

#define VGPU_ENTER_NVML(name)                                                  \
	do {                                                                   \
		vgpu_init();                                                   \
		vgpu_symbols_nvml();                                           \
		if (VGPU_UNLIKELY(REAL(name) == NULL))                         \
			return NVML_ERROR_FUNCTION_NOT_FOUND;                  \
	} while (0)

/* A charge taken before an allocation reaches the driver. */
struct vgpu_resv {
	int idx;            /* -1: nothing charged (pass through) */
	uint64_t bytes;
	CUcontext ctx;
};

/* Charges `bytes` on the current context's device; OOM if over the limit. */
CUresult vgpu_reserve_current(uint64_t bytes, struct vgpu_resv *rv);
/* Charges `bytes` on CUDA device `dev`. */
CUresult vgpu_reserve_dev(CUdevice dev, uint64_t bytes, struct vgpu_resv *rv);
/* Records a successful allocation under (kind, key), or refunds a failed one. */
void vgpu_settle(const struct vgpu_resv *rv, CUresult res, int kind, uint64_t key);
/*
 * Frees through `res` = the real free's result: the ledger entry is removed
 * before the call (so a reused address cannot be confused) and restored if the
 * driver refused the free.
 */
bool vgpu_forget(int kind, uint64_t key, struct vgpu_entry *e);
void vgpu_finish_free(bool had, const struct vgpu_entry *e, CUresult res);

#endif /* VGPU_HOOKS_H */
