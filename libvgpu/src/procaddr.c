/*
 * procaddr.c - cuGetProcAddress and cuGetProcAddress_v2.
 *
 * CUDA 11.3+ runtimes resolve the whole driver API through these, by base
 * name ("cuMemAlloc"), the CUDA version they were built for and a flag for
 * the per-thread default stream. The CUDA Driver API reference ("Driver Entry
 * Point Access") defines the answer: the newest variant of that name
 * introduced at or before the requested version, the per-thread one
 * (_ptsz/_ptds) when the flag asks for it and one exists. It promises nothing
 * about the address: a driver may hand out internal entry points that are not
 * its exported symbols, so libvgpu never matches the returned pointer against
 * dlsym results. It computes the variant from the same rule over its own
 * table (symbols.h, versions from cudaTypedefs.h), keeps the driver's pointer
 * as the one its hook calls, and returns the hook.
 *
 * A variant libvgpu does not know (a newer driver's cuMemAlloc_v3 requested
 * by a newer runtime) would reach the driver unlimited, so it is refused,
 * loudly: the check is to ask the driver again at the version of the variant
 * libvgpu chose and compare the two answers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hooks.h"

/* Hooked driver variants with their base names, built once from symbols.h. */
struct variant {
	enum vgpu_sym sym;
	int version;
	bool ptsz;
	bool renamed;   /* the base name is not the symbol's own (renamed[] below) */
	char base[48];
};

/*
 * Names whose newest meaning is another entry point. CUDA 12's cuda.h maps
 * cuGraphInstantiate to cuGraphInstantiateWithFlags (its cudaTypedefs.h
 * makes PFN_cuGraphInstantiate PFN_cuGraphInstantiateWithFlags_v11040), so a
 * runtime built for 12.0 or later asking for "cuGraphInstantiate" receives
 * the three-argument function, older ones cuGraphInstantiate(_v2). Without
 * this entry the 12.x answer would be a variant libvgpu does not know.
 */
static const struct {
	const char *base;
	enum vgpu_sym sym;
	int version;
} renamed[] = {
	{"cuGraphInstantiate", SYM_cuGraphInstantiateWithFlags, 12000},
};
#define NRENAMED ((int)(sizeof(renamed) / sizeof(renamed[0])))

static struct variant vars[SYM_COUNT + NRENAMED];
static int nvars;
static pthread_once_t vars_once = PTHREAD_ONCE_INIT;
static unsigned char refused_logged[SYM_COUNT];

static bool strip_suffix(char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	if (n <= k || strcmp(s + n - k, suffix) != 0)
		return false;
	s[n - k] = '\0';
	return true;
}

/* cuMemAllocAsync_ptsz -> cuMemAllocAsync, cuCtxCreate_v3 -> cuCtxCreate. */
static void build_variants(void)
{
	for (int i = 0; i < SYM_COUNT; i++) {
		if (!vgpu_sym_is_cuda_hook((enum vgpu_sym)i))
			continue;
		struct variant *v = &vars[nvars++];
		v->sym = (enum vgpu_sym)i;
		v->version = vgpu_sym_version(v->sym);
		snprintf(v->base, sizeof(v->base), "%s", vgpu_sym_name(v->sym));
		v->ptsz = strip_suffix(v->base, "_ptsz") || strip_suffix(v->base, "_ptds");
		char *u = strrchr(v->base, '_');
		if (u != NULL && u[1] == 'v' && u[2] >= '2' && u[2] <= '9' && u[3] == '\0')
			*u = '\0';
	}
	for (int i = 0; i < NRENAMED; i++) {
		struct variant *v = &vars[nvars++];
		*v = (struct variant){.sym = renamed[i].sym, .version = renamed[i].version, .renamed = true};
		snprintf(v->base, sizeof(v->base), "%s", renamed[i].base);
	}
}

/*
 * The variant the documented rule picks for (symbol, version, flags), or NULL
 * when none qualifies. *ours says whether libvgpu hooks the name at all. A
 * full variant name ("cuMemAlloc_v2") is not a documented query, but if a
 * driver answered it the answer is that variant.
 */
static const struct variant *choose(const char *symbol, int version, cuuint64_t flags, bool *ours)
{
	const struct variant *best = NULL, *best_pt = NULL;
	pthread_once(&vars_once, build_variants);
	*ours = false;
	for (int i = 0; i < nvars; i++) {
		const struct variant *v = &vars[i];
		const char *full = vgpu_sym_name(v->sym);
		if (!v->renamed && strcmp(full, v->base) != 0 && strcmp(full, symbol) == 0) {
			*ours = true;
			return v;
		}
		if (strcmp(v->base, symbol) != 0)
			continue;
		*ours = true;
		if (v->version > version)
			continue;
		const struct variant **slot = v->ptsz ? &best_pt : &best;
		if (*slot == NULL || v->version > (*slot)->version)
			*slot = v;
	}
	if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_pt != NULL)
		return best_pt;
	return best;
}

static CUresult real_lookup(bool v2, const char *symbol, void **pfn, int version,
			    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	if (v2)
		return REAL(cuGetProcAddress_v2)(symbol, pfn, version, flags, status);
	return REAL(cuGetProcAddress)(symbol, pfn, version, flags);
}

/* True when asking at the chosen variant's own version gives the same pointer. */
static bool driver_agrees(bool v2, const char *symbol, const struct variant *v, int version,
			  cuuint64_t flags, void *driver)
{
	if (v->version == version || strcmp(v->base, symbol) != 0)
		return true;    /* asked at its own version, or by its full name */
	void *check = NULL;
	CUdriverProcAddressQueryResult st;
	return real_lookup(v2, symbol, &check, v->version, flags, v2 ? &st : NULL) == CUDA_SUCCESS &&
	       check == driver;
}

static CUresult refuse(const char *symbol, int version, const struct variant *v, void **pfn,
		       CUdriverProcAddressQueryResult *status)
{
	enum vgpu_sym sym = v != NULL ? v->sym : SYM_COUNT;
	if (sym == SYM_COUNT || !__atomic_exchange_n(&refused_logged[sym], 1, __ATOMIC_RELAXED))
		VGPU_LOG(VGPU_LOG_ERROR,
			 "cuGetProcAddress(\"%s\", %d): the driver answers with a variant this libvgpu "
			 "does not know (it knows %s); refusing it, since calls through it would "
			 "bypass the container's limits. Update libvgpu for this driver",
			 symbol, version, v != NULL ? vgpu_sym_name(v->sym) : "no variant this old");
	*pfn = NULL;
	if (status != NULL)
		*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
	return CUDA_ERROR_NOT_FOUND;
}

static CUresult resolve(bool v2, const char *symbol, void **pfn, int version, cuuint64_t flags,
			CUdriverProcAddressQueryResult *status)
{
	CUresult res = real_lookup(v2, symbol, pfn, version, flags, status);
	if (res != CUDA_SUCCESS || symbol == NULL || pfn == NULL || *pfn == NULL)
		return res;
	bool ours;
	const struct variant *v = choose(symbol, version, flags, &ours);
	if (!ours)
		return res;     /* not hooked: the driver's answer, untouched */
	void *driver = *pfn;
	if (v == NULL || !driver_agrees(v2, symbol, v, version, flags, driver))
		return refuse(symbol, version, v, pfn, status);
	vgpu_sym_set_real(v->sym, driver);
	*pfn = vgpu_sym_hook(v->sym);
	return res;
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					 cuuint64_t flags,
					 CUdriverProcAddressQueryResult *symbolStatus)
{
	VGPU_ENTER_CUDA(cuGetProcAddress_v2);
	return resolve(true, symbol, pfn, cudaVersion, flags, symbolStatus);
}

VGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				      cuuint64_t flags)
{
	VGPU_ENTER_CUDA(cuGetProcAddress);
	return resolve(false, symbol, pfn, cudaVersion, flags, NULL);
}
