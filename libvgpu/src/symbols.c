/*
 * symbols.c - binds the real CUDA driver and NVML entry points once.
 *
 * The real libraries are opened by soname through the normal loader search
 * path (LD_LIBRARY_PATH, ld.so.cache), so whatever libcuda.so.1 the
 * application would get is the one wrapped. LIBVGPU_CUDA_PATH and
 * LIBVGPU_NVML_PATH override the name for unusual installations and tests.
 */
#define _GNU_SOURCE
#include "symbols.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

void *vgpu_real[SYM_COUNT];

enum { KIND_CALL = 0, KIND_HOOK = 1 };

static const struct {
	const char *name;
	unsigned char lib;
	unsigned char kind;
	int version;
} sym_info[] = {
#define VGPU_SYM_INFO(name, lib, kind, version) [SYM_##name] = {#name, VGPU_LIB_##lib, KIND_##kind, version},
	VGPU_SYMBOLS(VGPU_SYM_INFO)
#undef VGPU_SYM_INFO
};
_Static_assert(sizeof(sym_info) / sizeof(sym_info[0]) == SYM_COUNT,
	       "sym_info must have one entry per enum vgpu_sym");

/* Hooked entries point at libvgpu's exported function of the same name. */
#define VGPU_HOOKPTR_HOOK(name) ((void *)&name)
#define VGPU_HOOKPTR_CALL(name) NULL
static void *const hook_fn[] = {
#define VGPU_SYM_HOOK(name, lib, kind, version) [SYM_##name] = VGPU_HOOKPTR_##kind(name),
	VGPU_SYMBOLS(VGPU_SYM_HOOK)
#undef VGPU_SYM_HOOK
};
_Static_assert(sizeof(hook_fn) / sizeof(hook_fn[0]) == SYM_COUNT,
	       "hook_fn must have one entry per enum vgpu_sym");

static vgpu_dlsym_fn real_dlsym_fn;

/*
 * libvgpu exports dlsym, so the real one must be found by version: RTLD_NEXT
 * from inside libvgpu skips our own definition. glibc >= 2.34 keeps dlsym in
 * libc (GLIBC_2.34); older ones in libdl (GLIBC_2.2.5 on x86-64, 2.17 on arm64).
 */
VGPU_NO_SANITIZE static void bind_dlsym(void)
{
	/* Spelled out rather than a table: no global data is read before ASan is up. */
	void *fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (fn == NULL)
		fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (fn == NULL)
		fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
	if (fn != NULL) {
		__atomic_store_n(&real_dlsym_fn, (vgpu_dlsym_fn)fn, __ATOMIC_RELEASE);
		return;
	}
	VGPU_LOG(VGPU_LOG_ERROR, "cannot find the C library's dlsym; dlsym lookups will fail");
}

/*
 * No pthread_once here: a sanitizer runtime resolves its own interceptors
 * through dlsym while it initialises, and TSan intercepts pthread_once, which
 * crashes before the runtime exists. bind_dlsym is idempotent (every racing
 * first caller stores the same pointer), so a plain atomic check is enough.
 */
VGPU_NO_SANITIZE vgpu_dlsym_fn vgpu_real_dlsym(void)
{
	vgpu_dlsym_fn fn = __atomic_load_n(&real_dlsym_fn, __ATOMIC_ACQUIRE);
	if (__builtin_expect(fn == NULL, 0)) {
		bind_dlsym();
		fn = __atomic_load_n(&real_dlsym_fn, __ATOMIC_ACQUIRE);
	}
	return fn;
}

static void *lib_handle[2];
static pthread_once_t lib_once[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static void load_lib(enum vgpu_lib lib)
{
	const char *env = lib == VGPU_LIB_CUDA ? "LIBVGPU_CUDA_PATH" : "LIBVGPU_NVML_PATH";
	const char *path = getenv(env);
	vgpu_dlsym_fn real_dlsym = vgpu_real_dlsym();

	if (path == NULL || path[0] == '\0')
		path = lib == VGPU_LIB_CUDA ? "libcuda.so.1" : "libnvidia-ml.so.1";
	void *handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (handle == NULL || real_dlsym == NULL) {
		/* Not an error for processes that never use the GPU. */
		VGPU_LOG(VGPU_LOG_INFO, "cannot open %s: %s", path, handle ? "no dlsym" : dlerror());
		return;
	}
	int missing = 0;
	for (int i = 0; i < SYM_COUNT; i++) {
		if (sym_info[i].lib != lib)
			continue;
		void *fn = real_dlsym(handle, sym_info[i].name);
		__atomic_store_n(&vgpu_real[i], fn, __ATOMIC_RELAXED);
		if (fn == NULL) {
			missing++;
			VGPU_LOG(VGPU_LOG_DEBUG, "%s has no %s", path, sym_info[i].name);
		}
	}
	VGPU_LOG(VGPU_LOG_DEBUG, "bound %s (%d optional symbols missing)", path, missing);
	__atomic_store_n(&lib_handle[lib], handle, __ATOMIC_RELEASE);
}

static void load_cuda(void) { load_lib(VGPU_LIB_CUDA); }
static void load_nvml(void) { load_lib(VGPU_LIB_NVML); }

void vgpu_symbols_cuda(void) { pthread_once(&lib_once[VGPU_LIB_CUDA], load_cuda); }
void vgpu_symbols_nvml(void) { pthread_once(&lib_once[VGPU_LIB_NVML], load_nvml); }

int vgpu_cuda_loaded(void)
{
	vgpu_symbols_cuda();
	return __atomic_load_n(&lib_handle[VGPU_LIB_CUDA], __ATOMIC_ACQUIRE) != NULL;
}

int vgpu_nvml_loaded(void)
{
	vgpu_symbols_nvml();
	return __atomic_load_n(&lib_handle[VGPU_LIB_NVML], __ATOMIC_ACQUIRE) != NULL;
}

void *vgpu_cuda_handle(void)
{
	return __atomic_load_n(&lib_handle[VGPU_LIB_CUDA], __ATOMIC_ACQUIRE);
}

const char *vgpu_sym_name(enum vgpu_sym sym)
{
	return (unsigned)sym < SYM_COUNT ? sym_info[sym].name : "?";
}

/* Hooked entries sorted by name, for the dlsym path's binary search. */
static int sorted_hooks[SYM_COUNT];
static int sorted_count;
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int cmp_hook(const void *a, const void *b)
{
	return strcmp(sym_info[*(const int *)a].name, sym_info[*(const int *)b].name);
}

static void sort_hooks(void)
{
	for (int i = 0; i < SYM_COUNT; i++)
		if (sym_info[i].kind == KIND_HOOK)
			sorted_hooks[sorted_count++] = i;
	qsort(sorted_hooks, (size_t)sorted_count, sizeof(int), cmp_hook);
}

int vgpu_hook_by_name(const char *name, void **hook)
{
	pthread_once(&sorted_once, sort_hooks);
	int lo = 0, hi = sorted_count - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		int sym = sorted_hooks[mid];
		int c = strcmp(name, sym_info[sym].name);
		if (c == 0) {
			if (sym_info[sym].lib == VGPU_LIB_CUDA)
				vgpu_symbols_cuda();
			else
				vgpu_symbols_nvml();
			*hook = __atomic_load_n(&vgpu_real[sym], __ATOMIC_RELAXED) != NULL ? hook_fn[sym]
											   : NULL;
			return 1;
		}
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return 0;
}

bool vgpu_sym_is_cuda_hook(enum vgpu_sym sym)
{
	return (unsigned)sym < SYM_COUNT && sym_info[sym].kind == KIND_HOOK &&
	       sym_info[sym].lib == VGPU_LIB_CUDA;
}

int vgpu_sym_version(enum vgpu_sym sym)
{
	return (unsigned)sym < SYM_COUNT ? sym_info[sym].version : 0;
}

void *vgpu_sym_hook(enum vgpu_sym sym)
{
	return (unsigned)sym < SYM_COUNT ? hook_fn[sym] : NULL;
}

void vgpu_sym_set_real(enum vgpu_sym sym, void *real)
{
	if ((unsigned)sym < SYM_COUNT && real != NULL)
		__atomic_store_n(&vgpu_real[sym], real, __ATOMIC_RELAXED);
}
