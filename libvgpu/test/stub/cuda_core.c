/*
 * cuda_core.c - stub driver: shared state, devices, contexts, cuGetProcAddress.
 * Built with -Bsymbolic so that its own function addresses are its own even
 * when libvgpu (preloaded) exports the same names.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"
#include "stub.h"
#include "stub_int.h"

static struct stub_shared *g;
static struct stub_stats stats;
int stub_inited;
static int visible[STUB_MAX_DEV];
static int visible_mig[STUB_MAX_DEV];    /* MIG instance of a visible entry, -1: whole GPU */
static int nvisible;

struct stub_shared *vgpuStubShared(void) { return g; }
struct stub_stats *vgpuStubStats(void) { return &stats; }

uint64_t vgpuStubNowNs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static void format(struct stub_shared *s)
{
	memset(s, 0, sizeof(*s));
	s->ndev = (int)env_u64("VGPU_STUB_DEVICES", 3);
	if (s->ndev > STUB_MAX_DEV)
		s->ndev = STUB_MAX_DEV;
	s->wave_ns = env_u64("VGPU_STUB_WAVE_NS", 250000);
	s->max_queue_ns = env_u64("VGPU_STUB_MAX_QUEUE_NS", 4000000);
	const char *ts = getenv("VGPU_STUB_TIMESLICE");
	s->timeslice = ts != NULL && strcmp(ts, "1") == 0;
	s->ctx_mem = env_u64("VGPU_STUB_CTX_MEM", 64u << 20);
	for (int d = 0; d < s->ndev; d++) {
		s->dev[d].total = env_u64("VGPU_STUB_MEM", UINT64_C(16) << 30);
		s->dev[d].sm = (int)env_u64("VGPU_STUB_SM", 16);
		snprintf(s->dev[d].uuid, sizeof(s->dev[d].uuid),
			 "GPU-5ab0e000-0000-4000-8000-00000000000%d", d);
	}
	__atomic_store_n(&s->magic, STUB_MAGIC, __ATOMIC_RELEASE);
}

/*
 * MIG (VGPU_STUB_MIG=<physical index>): that GPU is in MIG mode with two
 * instances, MIG-...-0000000000<d>0 and ...<d>1. CUDA sees an instance
 * only when CUDA_VISIBLE_DEVICES names its MIG- UUID.
 */
int stub_mig_phys(void)
{
	const char *v = getenv("VGPU_STUB_MIG");
	return v != NULL && *v ? atoi(v) : -1;
}

void stub_mig_uuid(int phys, int k, char *out, size_t len)
{
	snprintf(out, len, "MIG-5ab0e000-0000-4000-9000-0000000000%d%d", phys, k);
}

/*
 * CUDA's enumeration order: fastest first unless CUDA_DEVICE_ORDER is
 * PCI_BUS_ID (CUDA programming guide, "CUDA Environment Variables").
 * VGPU_STUB_CUDA_ORDER=reverse models devices of different speeds, the
 * fastest last on the PCI bus, so CUDA's order is the reverse of NVML's.
 * CUDA_VISIBLE_DEVICES indices are taken in that order. In remote mode a
 * device the daemon refuses (OPEN: its /dev/nvidia<minor> is not the
 * driver's) is no CUDA device at all, as CUDA enumerates only the devices
 * it can open; the order holds the others and the count is returned.
 */
static int cuda_order(int order[STUB_MAX_DEV])
{
	const char *o = getenv("CUDA_DEVICE_ORDER");
	const char *r = getenv("VGPU_STUB_CUDA_ORDER");
	int reverse = r != NULL && strcmp(r, "reverse") == 0 &&
		      !(o != NULL && strcmp(o, "PCI_BUS_ID") == 0);
	int n = 0;
	for (int d = 0; d < g->ndev; d++) {
		int phys = reverse ? g->ndev - 1 - d : d;
		if (stub_remote_open(phys) == 0)
			order[n++] = phys;
	}
	return n;
}

static int visible_entry(const char *tok, const int order[STUB_MAX_DEV], int n, int *mig)
{
	*mig = -1;
	if (strncmp(tok, "GPU-", 4) == 0) {
		for (int i = 0; i < n; i++)
			if (strncmp(g->dev[order[i]].uuid, tok, strlen(tok)) == 0)
				return order[i];
		return -1;
	}
	if (strncmp(tok, "MIG-", 4) == 0) {
		int p = stub_mig_phys();
		char u[64];
		for (int k = 0; p >= 0 && p < g->ndev && k < 2; k++) {
			stub_mig_uuid(p, k, u, sizeof(u));
			if (strcmp(u, tok) == 0) {
				*mig = k;
				return p;
			}
		}
		return -1;
	}
	char *end;
	long idx = strtol(tok, &end, 10);
	return *end == '\0' && idx >= 0 && idx < n ? order[idx] : -1;
}

static void parse_visible(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	int order[STUB_MAX_DEV];
	int n = cuda_order(order);
	nvisible = 0;
	if (v == NULL) {
		for (int i = 0; i < n; i++)
			if (order[i] != stub_mig_phys()) {  /* MIG instances only when named */
				visible_mig[nvisible] = -1;
				visible[nvisible++] = order[i];
			}
		return;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && nvisible < STUB_MAX_DEV;
	     tok = strtok_r(NULL, ",", &save)) {
		int mig;
		int found = visible_entry(tok, order, n, &mig);
		if (found < 0)
			break;  /* like CUDA: stop at the first invalid entry */
		visible_mig[nvisible] = mig;
		visible[nvisible++] = found;
	}
}

__attribute__((constructor)) static void stub_load(void)
{
	stub_remote_attach();
	const char *path = stub_remote() ? NULL : getenv("VGPU_STUB_STATE");
	if (path && *path) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd >= 0 && flock(fd, LOCK_EX) == 0 && ftruncate(fd, sizeof(*g)) == 0) {
			g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (g != MAP_FAILED && g->magic != STUB_MAGIC)
				format(g);
			flock(fd, LOCK_UN);
		}
		if (fd >= 0)
			close(fd);
		if (g == MAP_FAILED)
			g = NULL;
	}
	if (g == NULL) {
		g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		format(g);
	}
	if (stub_remote())
		g->ndev = 0;    /* until the daemon gives its list (cuInit, nvmlInit) */
	else
		parse_visible();
	stub_obs_attach();
}

int stub_phys(CUdevice dev)
{
	return dev >= 0 && dev < nvisible ? visible[dev] : -1;
}

CUresult stub_dev_charge(int phys, uint64_t bytes)
{
	if (stub_remote()) {
		CUresult r = stub_remote_alloc(phys, bytes);
		if (r == CUDA_SUCCESS) {
			__atomic_fetch_add(&stats.held[phys], bytes, __ATOMIC_RELAXED);
			stub_obs_charge(phys, bytes);
		}
		return r;
	}
	uint64_t cur = __atomic_load_n(&g->dev[phys].used, __ATOMIC_RELAXED);
	do {
		if (bytes > g->dev[phys].total || cur + bytes > g->dev[phys].total)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} while (!__atomic_compare_exchange_n(&g->dev[phys].used, &cur, cur + bytes, 1,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	__atomic_fetch_add(&stats.held[phys], bytes, __ATOMIC_RELAXED);
	stub_proc_mem(phys, (int64_t)bytes);
	stub_obs_charge(phys, bytes);
	return CUDA_SUCCESS;
}

void stub_dev_release(int phys, uint64_t bytes)
{
	stub_obs_release(phys, bytes);
	if (stub_remote()) {
		stub_remote_free(phys, bytes);
		__atomic_fetch_sub(&stats.held[phys], bytes, __ATOMIC_RELAXED);
		return;
	}
	stub_proc_mem(phys, -(int64_t)bytes);
	__atomic_fetch_sub(&g->dev[phys].used, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&stats.held[phys], bytes, __ATOMIC_RELAXED);
}

void stub_dev_release_for(int32_t hostpid, int32_t pid, int phys, uint64_t bytes)
{
	stub_obs_release_pid(pid, phys, bytes);
	struct stub_proc *p = stub_proc_rec(phys, hostpid, 0);
	if (p != NULL)
		__atomic_fetch_sub(&p->mem, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&g->dev[phys].used, bytes, __ATOMIC_RELAXED);
}

void stub_dev_disown(int phys, uint64_t bytes)
{
	/*
	 * The observer keeps the bytes on this process: the device still holds
	 * them. In local mode the last importer takes them off
	 * (stub_dev_release_for); in remote mode the daemon, the truth there,
	 * does, and the observer drops them when this process ends.
	 */
	__atomic_fetch_sub(&stats.held[phys], bytes, __ATOMIC_RELAXED);
}

/* ---- entry points ---- */

/* Remote mode: CUDA_VISIBLE_DEVICES applies to the daemon's list, read once. */
static pthread_once_t remote_visible = PTHREAD_ONCE_INIT;

CUresult cuInit(unsigned int flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_remote()) {
		/*
		 * No device the process may open: "no CUDA-capable devices were
		 * detected by the installed CUDA driver" (CUDA_ERROR_NO_DEVICE,
		 * CUDA Driver API reference).
		 */
		if (stub_remote_load() != 0 || g->ndev == 0)
			return CUDA_ERROR_NO_DEVICE;
		pthread_once(&remote_visible, parse_visible);
		if (nvisible == 0)
			return CUDA_ERROR_NO_DEVICE;
	}
	stub_inited = 1;
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
	if (version == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 12040;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	STUB_NEED_INIT();
	*count = nvisible;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	STUB_NEED_INIT();
	if (stub_phys(ordinal) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*pi = attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? g->dev[phys].sm : 1;
	return CUDA_SUCCESS;
}

/* 16 bytes of a "GPU-xxxxxxxx-xxxx-..." string. */
static void uuid_bytes(const char *s, CUuuid *u)
{
	int n = 0;
	memset(u, 0, sizeof(*u));
	for (const char *c = s + 4; *c != '\0' && n < 32; c++) {
		int v = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
		if (v < 0)
			continue;
		u->bytes[n / 2] = (char)(u->bytes[n / 2] | (n % 2 == 0 ? v << 4 : v));
		n++;
	}
}

/*
 * cuDeviceGetUuid_v2 returns a MIG instance's own UUID in MIG mode (CUDA
 * Driver API reference); the first version, the GPU's. With
 * VGPU_STUB_NO_UUID=1 both fail with CUDA_ERROR_NOT_SUPPORTED, standing in
 * for a driver that cannot say a device's UUID: cuda.h declares
 * cuDeviceGetUuid from CUDA 9.2, so on an older driver dlsym or
 * cuGetProcAddress finds no such entry point. This one shared object
 * cannot leave its export out per process, and the reference lists no
 * NOT_SUPPORTED for the call, so the error is the stub's choice: what it
 * exercises is the callers' fallback to CUDA_VISIBLE_DEVICES and NVML's
 * order, which gpu_check (target.c) and libvgpu (device.c) take alike
 * for a missing entry point and for a failed call.
 */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev, int v2)
{
	STUB_NEED_INIT();
	const char *no = getenv("VGPU_STUB_NO_UUID");
	if (no != NULL && strcmp(no, "1") == 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (uuid == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	char mig[64];
	if (v2 && visible_mig[dev] >= 0) {
		stub_mig_uuid(phys, visible_mig[dev], mig, sizeof(mig));
		uuid_bytes(mig, uuid);
	} else {
		uuid_bytes(g->dev[phys].uuid, uuid);
	}
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev, 0); }
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return device_uuid(uuid, dev, 1); }

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = g->dev[phys].total;
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t b;
	CUresult r = cuDeviceTotalMem_v2(&b, dev);
	if (r == CUDA_SUCCESS)
		*bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
	return r;
}

/* ---- contexts ---- */

static struct stub_ctx primary[STUB_MAX_DEV];
static int primary_refs[STUB_MAX_DEV];
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread struct stub_ctx *current;

struct stub_ctx *stub_current(void) { return current; }

/*
 * Creating a context takes a real driver tens to hundreds of milliseconds;
 * VGPU_STUB_CTX_DELAY_US makes the stub's take that long too, so that
 * processes starting together create theirs at overlapping times.
 */
static void ctx_delay(void)
{
	const char *v = getenv("VGPU_STUB_CTX_DELAY_US");
	long us = v != NULL ? atol(v) : 0;
	if (us > 0) {
		struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
		nanosleep(&ts, NULL);
	}
}

static CUresult ctx_new(CUcontext *pctx, CUdevice dev)
{
	STUB_NEED_INIT();
	ctx_delay();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (pctx == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = stub_dev_charge(phys, g->ctx_mem);
	if (r != CUDA_SUCCESS)
		return r;
	struct stub_ctx *c = calloc(1, sizeof(*c));
	c->phys = phys;
	c->ordinal = dev;
	stub_proc_ctx(phys, 1);
	current = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_new(pctx, dev);
}
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags,
			CUdevice dev)
{
	(void)p, (void)n, (void)flags;
	return ctx_new(pctx, dev);
}
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev)
{
	(void)p, (void)flags;
	return ctx_new(pctx, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
	struct stub_ctx *c = (struct stub_ctx *)ctx;
	if (c == NULL || (c >= primary && c < primary + STUB_MAX_DEV))
		return CUDA_ERROR_INVALID_CONTEXT;
	stub_free_owned(c);
	stub_dev_release(c->phys, g->ctx_mem);
	stub_proc_ctx(c->phys, -1);
	if (current == c)
		current = NULL;
	free(c);
	return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
CUresult cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	STUB_NEED_INIT();
	*pctx = (CUcontext)current;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	STUB_NEED_INIT();
	current = (struct stub_ctx *)ctx;
	return CUDA_SUCCESS;
}

/*
 * The per-thread context stack (CUDA Driver API reference, Context
 * Management): push makes ctx current above the previous one, pop returns
 * the current one and makes the previous current again. Eight deep here.
 */
static __thread struct stub_ctx *ctx_stack[8];
static __thread int ctx_depth;

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	STUB_NEED_INIT();
	if (ctx == NULL || ctx_depth >= 8)
		return CUDA_ERROR_INVALID_VALUE;
	ctx_stack[ctx_depth++] = current;
	current = (struct stub_ctx *)ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	STUB_NEED_INIT();
	if (current == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (pctx != NULL)
		*pctx = (CUcontext)current;
	current = ctx_depth > 0 ? ctx_stack[--ctx_depth] : NULL;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
	STUB_NEED_INIT();
	if (current == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = current->ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ctx_mu);
	if (primary_refs[phys] == 0)
		ctx_delay();
	CUresult r = primary_refs[phys] == 0 ? stub_dev_charge(phys, g->ctx_mem) : CUDA_SUCCESS;
	if (r != CUDA_SUCCESS) {
		pthread_mutex_unlock(&ctx_mu);
		return r;
	}
	if (primary_refs[phys] == 0)
		stub_proc_ctx(phys, 1);
	primary_refs[phys]++;
	primary[phys].phys = phys;
	primary[phys].ordinal = dev;
	pthread_mutex_unlock(&ctx_mu);
	*pctx = (CUcontext)&primary[phys];
	return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ctx_mu);
	if (primary_refs[phys] == 0) {
		pthread_mutex_unlock(&ctx_mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int last = --primary_refs[phys] == 0;
	pthread_mutex_unlock(&ctx_mu);
	if (last) {
		stub_free_owned(&primary[phys]);
		stub_dev_release(phys, g->ctx_mem);
		stub_proc_ctx(phys, -1);
		if (current == &primary[phys])
			current = NULL;
	}
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }

static CUresult primary_reset(CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	stub_free_owned(&primary[phys]);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }
