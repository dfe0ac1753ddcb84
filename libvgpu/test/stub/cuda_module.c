/*
 * cuda_module.c - stub modules, functions and device names.
 *
 * Just enough for programs that load a kernel and launch it (gpucheck's SM
 * share check): the stub runs no code, a launch only keeps the device busy
 * (cuda_exec.c), so a module records nothing of its image and a function is
 * a handle. Return codes follow the CUDA Driver API reference, sections
 * "Module Management" (cuModuleLoadData, cuModuleGetFunction,
 * cuModuleUnload: CUDA_SUCCESS, CUDA_ERROR_NOT_INITIALIZED,
 * CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE, ...) and "Device
 * Management" (cuDeviceGetName: CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE,
 * CUDA_ERROR_INVALID_DEVICE, ...); the codes only a real JIT or loader can
 * produce (CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NOT_FOUND for an unknown
 * kernel name) are never returned.
 *
 * The device name contains "stub" so that tools can tell the stub from a
 * real GPU (gpucheck skips unless GPU_CHECK_ALLOW_STUB=1).
 *
 * CUmodule is not in cuda_api.h (libvgpu does not hook modules); the handles
 * are declared here by their structs, which have the same representation as
 * the driver's opaque pointer types.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "stub_int.h"

struct stub_func {
	struct stub_module *mod;
	struct stub_func *next;
};

struct stub_module {
	struct stub_func *funcs;    /* freed with the module, as the driver does */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	STUB_NEED_INIT();
	if (name == NULL || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (stub_remote())
		snprintf(name, (size_t)len, "%s", stub_remote_name(phys));    /* the daemon's DEV name */
	else
		snprintf(name, (size_t)len, "vGPU stub device %d", phys);
	return CUDA_SUCCESS;
}

/* The image is not parsed: any non-NULL pointer loads (a real driver JITs or links it). */
CUresult cuModuleLoadData(struct stub_module **module, const void *image)
{
	STUB_NEED_INIT();
	if (stub_current() == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (module == NULL || image == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct stub_module *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*module = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(struct stub_func **hfunc, struct stub_module *hmod, const char *name)
{
	STUB_NEED_INIT();
	if (hfunc == NULL || hmod == NULL || name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct stub_func *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	f->mod = hmod;
	pthread_mutex_lock(&mu);
	f->next = hmod->funcs;
	hmod->funcs = f;
	pthread_mutex_unlock(&mu);
	*hfunc = f;
	return CUDA_SUCCESS;
}

/* Unloading invalidates the module's function handles, so they go with it. */
CUresult cuModuleUnload(struct stub_module *hmod)
{
	STUB_NEED_INIT();
	if (hmod == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	struct stub_func *f = hmod->funcs;
	hmod->funcs = NULL;
	pthread_mutex_unlock(&mu);
	while (f != NULL) {
		struct stub_func *next = f->next;
		free(f);
		f = next;
	}
	free(hmod);
	return CUDA_SUCCESS;
}
