/* cuda_mem.c - stub driver memory: linear, arrays, VMM, stream-ordered pools. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stub_int.h"

enum { K_LINEAR = 1, K_ARRAY, K_ASYNC };

struct alloc {
	uint64_t key;
	uint64_t size;
	int phys;
	int kind;
	void *owner;    /* context, or pool for K_ASYNC */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *tab;
static size_t cap, used_slots;
static uint64_t next_va = UINT64_C(0x7f0000000000);
static uint64_t next_va32 = UINT64_C(0x10000000);

static size_t hash(uint64_t k) { return (size_t)((k * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1); }

static void put_locked(struct alloc a)
{
	if ((used_slots + 1) * 2 > cap) {
		size_t ocap = cap;
		struct alloc *old = tab;
		cap = cap ? cap * 2 : 1024;
		tab = calloc(cap, sizeof(*tab));
		used_slots = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].kind > 0)
				put_locked(old[i]);
		free(old);
	}
	size_t j = hash(a.key);
	while (tab[j].kind > 0)
		j = (j + 1) & (cap - 1);
	tab[j] = a;
	used_slots++;
}

/* Deletes slot i with backward shifting, so probe chains never fill up. */
static void erase_locked(size_t i)
{
	size_t j = i;
	for (;;) {
		tab[i].kind = 0;
		for (;;) {
			j = (j + 1) & (cap - 1);
			if (tab[j].kind == 0) {
				used_slots--;
				return;
			}
			size_t home = hash(tab[j].key);
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		tab[i] = tab[j];
		i = j;
	}
}

static int take_locked(uint64_t key, int kind, struct alloc *out)
{
	if (cap == 0)
		return -1;
	for (size_t j = hash(key);; j = (j + 1) & (cap - 1)) {
		if (tab[j].kind == 0)
			return -1;
		if (tab[j].kind == kind && tab[j].key == key) {
			*out = tab[j];
			erase_locked(j);
			return 0;
		}
	}
}

static uint64_t new_va(uint64_t size, int small)
{
	uint64_t step = (size + 0x1fffff) & ~UINT64_C(0x1fffff);
	return __atomic_fetch_add(small ? &next_va32 : &next_va, step ? step : 0x200000,
				  __ATOMIC_RELAXED);
}

static CUresult linear(uint64_t *key, uint64_t size, int kind, void *owner, int phys, int small)
{
	struct stub_stats *st = vgpuStubStats();
	__atomic_fetch_add(&st->alloc_calls, 1, __ATOMIC_RELAXED);
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = stub_dev_charge(phys, size);
	if (r != CUDA_SUCCESS)
		return r;
	*key = new_va(size, small);
	pthread_mutex_lock(&mu);
	put_locked((struct alloc){*key, size, phys, kind, owner});
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static CUresult release(uint64_t key, int kind)
{
	struct alloc a;
	__atomic_fetch_add(&vgpuStubStats()->free_calls, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&mu);
	int rc = take_locked(key, kind, &a);
	pthread_mutex_unlock(&mu);
	/* cuMemFree also frees stream-ordered memory and what a graph allocated and did not free. */
	if (rc != 0)
		return kind == K_LINEAR ? stub_pool_free_plain(key) : CUDA_ERROR_INVALID_VALUE;
	/* Exported with cuIpcGetMemHandle and still open elsewhere: the device keeps it. */
	if (kind == K_LINEAR && stub_ipc_owner_free(key)) {
		stub_dev_disown(a.phys, a.size);
		return CUDA_SUCCESS;
	}
	stub_dev_release(a.phys, a.size);
	return CUDA_SUCCESS;
}

/* The linear allocation based at dptr (cuIpcGetMemHandle): 0, or -1 when there is none. */
int stub_linear_info(uint64_t dptr, uint64_t *size, int *phys)
{
	int rc = -1;
	pthread_mutex_lock(&mu);
	for (size_t j = cap ? hash(dptr) : 0; cap != 0; j = (j + 1) & (cap - 1)) {
		if (tab[j].kind == 0)
			break;
		if (tab[j].kind == K_LINEAR && tab[j].key == dptr) {
			*size = tab[j].size;
			*phys = tab[j].phys;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

void stub_free_owned(struct stub_ctx *ctx)
{
	stub_host_free_owned(ctx);
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < cap;) {
		if (tab[i].kind > 0 && tab[i].owner == ctx) {
			if (tab[i].kind == K_LINEAR && stub_ipc_owner_free(tab[i].key))
				stub_dev_disown(tab[i].phys, tab[i].size);
			else
				stub_dev_release(tab[i].phys, tab[i].size);
			erase_locked(i);    /* may shift a later entry into i */
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&mu);
}

#define NEED_CTX(c)                                                            \
	struct stub_ctx *c = stub_current();                                   \
	if (!stub_inited)                                                      \
		return CUDA_ERROR_NOT_INITIALIZED;                             \
	if (c == NULL)                                                         \
		return CUDA_ERROR_INVALID_CONTEXT

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	NEED_CTX(c);
	uint64_t k = 0;
	CUresult r = linear(&k, size, K_LINEAR, c, c->phys, 0);
	if (r == CUDA_SUCCESS)
		*dptr = k;
	return r;
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size)
{
	NEED_CTX(c);
	uint64_t k = 0;
	CUresult r = linear(&k, size, K_LINEAR, c, c->phys, 1);
	if (r == CUDA_SUCCESS)
		*dptr = (CUdeviceptr_v1)k;
	return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	(void)flags;
	return cuMemAlloc_v2(dptr, size);
}

/*
 * The driver chooses the pitch: the API reference of cuMemAllocPitch only
 * says it "may pad the allocation" so rows are aligned for coalescing, and
 * returns the pitch it chose. VGPU_STUB_PITCH_ALIGN (default 512) models a
 * driver whose alignment is larger than an interposer can guess.
 */
static uint64_t pitch_of(uint64_t width)
{
	const char *v = getenv("VGPU_STUB_PITCH_ALIGN");
	uint64_t a = v != NULL && *v ? strtoull(v, NULL, 0) : 512;
	if (a == 0 || (a & (a - 1)) != 0)
		a = 512;
	return width > UINT64_MAX - a ? UINT64_MAX : (width + a - 1) & ~(a - 1);
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t w, size_t h,
			    unsigned int elem)
{
	(void)elem;
	NEED_CTX(c);
	uint64_t k = 0, pitch = pitch_of(w);
	CUresult r = linear(&k, mul_sat(pitch, h), K_LINEAR, c, c->phys, 0);
	if (r == CUDA_SUCCESS) {
		*dptr = k;
		*pPitch = pitch;
	}
	return r;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
			 unsigned int h, unsigned int elem)
{
	(void)elem;
	NEED_CTX(c);
	uint64_t k = 0, pitch = pitch_of(w);
	CUresult r = linear(&k, mul_sat(pitch, h), K_LINEAR, c, c->phys, 1);
	if (r == CUDA_SUCCESS) {
		*dptr = (CUdeviceptr_v1)k;
		*pPitch = (unsigned int)pitch;
	}
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { STUB_NEED_INIT(); return release(dptr, K_LINEAR); }
CUresult cuMemFree(CUdeviceptr_v1 dptr) { STUB_NEED_INIT(); return release(dptr, K_LINEAR); }

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	NEED_CTX(c);
	struct stub_dev *d = &vgpuStubShared()->dev[c->phys];
	uint64_t used = __atomic_load_n(&d->used, __ATOMIC_RELAXED), all = d->total;
	if (stub_remote() && stub_remote_mem(c->phys, &all, &used) != 0)
		return STUB_CUDA_ERROR_UNKNOWN;
	*total = all;
	*free_b = all > used ? all - used : 0;
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total)
{
	size_t f, t;
	CUresult r = cuMemGetInfo_v2(&f, &t);
	if (r == CUDA_SUCCESS) {
		*free_b = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
		*total = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	}
	return r;
}

/* Arrays take width*height*depth*texel bytes, per level for mipmaps. */
static uint64_t texel(int fmt, unsigned ch)
{
	uint64_t b = (fmt == 0x01 || fmt == 0x08) ? 1 : (fmt == 0x02 || fmt == 0x09 || fmt == 0x10) ? 2 : 4;
	return b * (ch ? ch : 1);
}

static uint64_t one(uint64_t v) { return v ? v : 1; }

static CUresult array_new(void **h, uint64_t bytes)
{
	NEED_CTX(c);
	uint64_t k = 0;
	CUresult r = linear(&k, bytes, K_ARRAY, c, c->phys, 0);
	if (r == CUDA_SUCCESS)
		*h = (void *)(uintptr_t)k;
	return r;
}

CUresult cuArrayCreate_v2(CUarray *p, const CUDA_ARRAY_DESCRIPTOR *d)
{
	return array_new((void **)p, one(d->Width) * one(d->Height) * texel(d->Format, d->NumChannels));
}
CUresult cuArrayCreate(CUarray *p, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	return array_new((void **)p, one(d->Width) * one(d->Height) * texel(d->Format, d->NumChannels));
}
CUresult cuArray3DCreate_v2(CUarray *p, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	return array_new((void **)p, one(d->Width) * one(d->Height) * one(d->Depth) *
					     texel(d->Format, d->NumChannels));
}
CUresult cuArray3DCreate(CUarray *p, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	return array_new((void **)p, (uint64_t)one(d->Width) * one(d->Height) * one(d->Depth) *
					     texel(d->Format, d->NumChannels));
}
CUresult cuArrayDestroy(CUarray a) { STUB_NEED_INIT(); return release((uint64_t)(uintptr_t)a, K_ARRAY); }

CUresult cuMipmappedArrayCreate(CUmipmappedArray *p, const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned int levels)
{
	uint64_t total = 0;
	int layered = (d->Flags & 0x05) != 0;
	for (unsigned l = 0; l < one(levels); l++)
		total += one(d->Width >> l) * one(d->Height >> l) *
			 (layered ? one(d->Depth) : one(d->Depth >> l)) * texel(d->Format, d->NumChannels);
	return array_new((void **)p, total);
}
CUresult cuMipmappedArrayDestroy(CUmipmappedArray a)
{
	STUB_NEED_INIT();
	return release((uint64_t)(uintptr_t)a, K_ARRAY);
}

#ifndef STUB_MINIMAL
/*
 * ---- VMM, with the lifetime the CUDA Driver API reference documents ----
 *
 * cuMemRelease: "The memory allocation will be freed when all outstanding
 * mappings to the memory are unmapped and when all outstanding references to
 * the handle ... are also released." cuMemUnmap: "The range must be the
 * entire contiguous address range that was mapped to ... Any backing memory
 * allocations will be freed if there are no existing mappings and there are
 * no unreleased memory handles." cuMemRetainAllocationHandle: "The handle is
 * guaranteed to be the same handle value used to map the memory ... must be
 * released with corresponding number of calls to cuMemRelease." So device
 * memory from cuMemCreate stays in use after the last cuMemRelease while it
 * is mapped (the programming guide's create, map, release idiom), and the
 * stub keeps charging the device for it until the last cuMemUnmap.
 */
#define MAX_VMM 4096
/*
 * xid: the shared record once exported (cuMemExportToShareableHandle) or
 * imported (cuMemImportFromShareableHandle, cuda_share.c). An imported
 * handle's memory is the exporter's: it was charged to the device once, when
 * the exporter created it, and the importer only holds a reference to it.
 */
struct vmm { uint64_t handle, size; int phys, refs, maps; uint64_t xid; int imported; };
struct mapping { uint64_t va, size, handle; };
static struct vmm vmms[MAX_VMM];
static struct mapping maps[MAX_VMM];
static int vmm_htypes[MAX_VMM];        /* requestedHandleTypes at cuMemCreate */
static uint64_t next_handle = 1;

static struct vmm *vmm_find(uint64_t h)
{
	for (int i = 0; i < MAX_VMM; i++)
		if (vmms[i].handle == h && (vmms[i].refs > 0 || vmms[i].maps > 0))
			return &vmms[i];
	return NULL;
}

/* Frees the physical memory once nothing references or maps it. Caller holds mu. */
static void vmm_maybe_free(struct vmm *v)
{
	if (v->refs > 0 || v->maps > 0)
		return;
	if (v->imported)
		stub_xmem_put(v->xid);
	else if (v->phys >= 0 && v->xid != 0 && stub_xmem_owner_drop(v->xid))
		stub_dev_disown(v->phys, v->size);     /* an importer still holds it */
	else if (v->phys >= 0)
		stub_dev_release(v->phys, v->size);
	v->handle = 0;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags)
{
	(void)flags;
	STUB_NEED_INIT();
	__atomic_fetch_add(&vgpuStubStats()->alloc_calls, 1, __ATOMIC_RELAXED);
	if (prop == NULL || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int phys = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? stub_phys(prop->location.id) : -1;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = phys >= 0 ? stub_dev_charge(phys, size) : CUDA_SUCCESS;
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMM; i++)
		if (vmms[i].refs == 0 && vmms[i].maps == 0) {
			vmms[i] = (struct vmm){next_handle++, size, phys, 1, 0, 0, 0};
			vmm_htypes[i] = prop->requestedHandleTypes;
			*h = vmms[i].handle;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	if (phys >= 0)
		stub_dev_release(phys, size);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	struct vmm *v = vmm_find(h);
	if (v == NULL || v->refs == 0) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	v->refs--;
	vmm_maybe_free(v);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
			     unsigned long long flags)
{
	(void)align, (void)addr, (void)flags;
	*ptr = new_va(size, 0);
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	(void)ptr, (void)size;
	STUB_NEED_INIT();
	return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		  unsigned long long flags)
{
	(void)offset, (void)flags;
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	struct vmm *v = vmm_find(h);
	CUresult res = v != NULL && v->refs > 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
	for (int i = 0; v != NULL && v->refs > 0 && i < MAX_VMM; i++)
		if (maps[i].handle == 0) {
			maps[i] = (struct mapping){ptr, size, h};
			v->maps++;
			res = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return res;
}

/* Unmaps every mapping that starts inside [ptr, ptr + size). */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	STUB_NEED_INIT();
	int found = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMM; i++) {
		if (maps[i].handle == 0 || maps[i].va < ptr || maps[i].va - ptr >= size)
			continue;
		struct vmm *v = vmm_find(maps[i].handle);
		maps[i].handle = 0;
		found++;
		if (v != NULL) {
			v->maps--;
			vmm_maybe_free(v);
		}
	}
	pthread_mutex_unlock(&mu);
	return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Access rights are not modelled: every mapping is accessible. */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count)
{
	(void)ptr, (void)size, (void)desc, (void)count;
	STUB_NEED_INIT();
	return CUDA_SUCCESS;
}

/* 2 MiB, the granularity NVIDIA documents as typical for device memory. */
CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       int option)
{
	(void)prop, (void)option;
	STUB_NEED_INIT();
	if (granularity == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = 2u << 20;
	return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMM; i++)
		if (maps[i].handle != 0 && maps[i].va == (uint64_t)(uintptr_t)addr) {
			struct vmm *v = vmm_find(maps[i].handle);
			if (v == NULL)
				break;
			v->refs++;
			*h = v->handle;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}
/*
 * cuMemExportToShareableHandle's side in this file: the handle's shared
 * record (made on the first export). CUDA_ERROR_INVALID_VALUE when the
 * handle was not created with that handle type requested (the reference:
 * the handle type must be one requested at cuMemCreate).
 */
CUresult stub_vmm_export(uint64_t h, int htype, uint64_t *xid)
{
	pthread_mutex_lock(&mu);
	struct vmm *v = vmm_find(h);
	CUresult res = CUDA_ERROR_INVALID_VALUE;
	if (v != NULL && v->refs > 0 && (vmm_htypes[v - vmms] & htype) != 0 && v->phys >= 0) {
		if (v->xid == 0 && !v->imported)
			v->xid = stub_xmem_new(v->phys, v->size);
		*xid = v->xid;
		res = v->xid != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&mu);
	return res;
}

/* cuMemImportFromShareableHandle: a new handle in this process on the shared record. */
CUresult stub_vmm_import(uint64_t xid, uint64_t size, CUmemGenericAllocationHandle *h)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_VMM; i++)
		if (vmms[i].refs == 0 && vmms[i].maps == 0) {
			vmms[i] = (struct vmm){next_handle++, size, -1, 1, 0, xid, 1};
			vmm_htypes[i] = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
			*h = vmms[i].handle;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}
#endif /* STUB_MINIMAL */
