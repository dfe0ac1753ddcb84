/*
 * launch.c - kernel launch hooks. Each launch passes the task-priority gate
 * (priority.c) when the container has a shared region, then the SM
 * limiter's gate (limiter.c) when a limit is active, the current device
 * resolved once for both; otherwise the only cost over the real call is
 * two loads of global flags and one predictable branch.
 */
#define _GNU_SOURCE
#include "hooks.h"

/*
 * Both gates, with the current device resolved once for the two (blocks 0:
 * a full wave, for graphs).
 */
static inline void gates(uint64_t blocks)
{
	bool prio = __atomic_load_n(&vgpu_prio_enabled, __ATOMIC_RELAXED);
	bool lim = __atomic_load_n(&vgpu_limiter_enabled, __ATOMIC_RELAXED);
	if (VGPU_LIKELY(!prio && !lim))
		return;
	CUdevice dev;
	int idx;
	if (vgpu_current_dev(&dev, &idx) != 0)
		return;
	if (prio)
		vgpu_prio_gate(idx);
	if (lim)
		vgpu_limiter_gate(dev, idx, blocks);
}

static inline void gate(uint64_t blocks) { gates(blocks == 0 ? 1 : blocks); }

#define GRID(x, y, z) ((uint64_t)(x) * (uint64_t)(y) * (uint64_t)(z))

VGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
				    unsigned int gz, unsigned int bx, unsigned int by,
				    unsigned int bz, unsigned int shmem, CUstream stream,
				    void **params, void **extra)
{
	VGPU_ENTER_CUDA(cuLaunchKernel);
	gate(GRID(gx, gy, gz));
	return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

VGPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					 unsigned int gz, unsigned int bx, unsigned int by,
					 unsigned int bz, unsigned int shmem, CUstream stream,
					 void **params, void **extra)
{
	VGPU_ENTER_CUDA(cuLaunchKernel_ptsz);
	gate(GRID(gx, gy, gz));
	return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

VGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
				      void **extra)
{
	VGPU_ENTER_CUDA(cuLaunchKernelEx);
	if (config != NULL)
		gate(GRID(config->gridDimX, config->gridDimY, config->gridDimZ));
	return REAL(cuLaunchKernelEx)(config, f, params, extra);
}

VGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
					   void **params, void **extra)
{
	VGPU_ENTER_CUDA(cuLaunchKernelEx_ptsz);
	if (config != NULL)
		gate(GRID(config->gridDimX, config->gridDimY, config->gridDimZ));
	return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
					       unsigned int gz, unsigned int bx, unsigned int by,
					       unsigned int bz, unsigned int shmem,
					       CUstream stream, void **params)
{
	VGPU_ENTER_CUDA(cuLaunchCooperativeKernel);
	gate(GRID(gx, gy, gz));
	return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
						    unsigned int gy, unsigned int gz,
						    unsigned int bx, unsigned int by,
						    unsigned int bz, unsigned int shmem,
						    CUstream stream, void **params)
{
	VGPU_ENTER_CUDA(cuLaunchCooperativeKernel_ptsz);
	gate(GRID(gx, gy, gz));
	return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream,
						    params);
}

/* A graph's kernels are not visible here; it is charged as one full wave. */
static inline void gate_graph(void) { gates(0); }

VGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
	VGPU_ENTER_CUDA(cuGraphLaunch);
	gate_graph();
	return REAL(cuGraphLaunch)(exec, stream);
}

VGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
	VGPU_ENTER_CUDA(cuGraphLaunch_ptsz);
	gate_graph();
	return REAL(cuGraphLaunch_ptsz)(exec, stream);
}
