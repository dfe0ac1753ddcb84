/*
 * dlsym.c - interposes dlsym so that runtimes which dlopen("libcuda.so.1")
 * and look entry points up by name get libvgpu's hooks.
 *
 * Only names libvgpu hooks are answered here; every other lookup goes to the
 * C library's dlsym as a tail call. The tail call matters: glibc resolves
 * RTLD_NEXT relative to the caller's return address, and a tail call leaves
 * the application's return address in place, so RTLD_NEXT keeps meaning
 * "after the caller", not "after libvgpu". The test suite checks this.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "hooks.h"

/* Cheap first filter: only cu* and nvml* names can be hooked. */
VGPU_NO_SANITIZE static inline bool maybe_hooked(const char *name)
{
	return name[0] == 'c' ? name[1] == 'u'
			      : (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l');
}

/* Returned by hooked_lookup() for names libvgpu does not hook. */
static char not_hooked;

/*
 * Answers a lookup of a hooked name. For a library handle the real symbol
 * must exist in that library (so feature probes behave as without libvgpu);
 * for RTLD_DEFAULT/RTLD_NEXT the real library must provide it. Kept out of
 * line so that dlsym() itself has no address-taken locals and the compiler
 * can turn its fall-through into a tail call.
 */
VGPU_NO_SANITIZE static __attribute__((noinline)) void *hooked_lookup(void *handle, const char *name,
						     vgpu_dlsym_fn real)
{
	void *hook;
	if (!maybe_hooked(name) || !vgpu_hook_by_name(name, &hook))
		return &not_hooked;
	if (hook == NULL) {
		void *lib = vgpu_cuda_handle();
		/* Let dlerror() describe the failure as the real lookup would. */
		if (lib != NULL)
			(void)real(lib, name);
		return NULL;
	}
	if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && real(handle, name) == NULL)
		return NULL;
	return hook;
}

VGPU_NO_SANITIZE VGPU_EXPORT void *dlsym(void *handle, const char *name)
{
	vgpu_dlsym_fn real = vgpu_real_dlsym();
	if (VGPU_UNLIKELY(real == NULL))
		return NULL;
	if ((name[0] == 'c' || name[0] == 'n')) {
		void *found = hooked_lookup(handle, name, real);
		if (found != &not_hooked)
			return found;
	}
	return real(handle, name);
}
