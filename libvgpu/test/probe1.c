/* probe1.c - looks up probe_dup with RTLD_NEXT; both it and libprobe2 define it. */
#define _GNU_SOURCE
#include <dlfcn.h>

int probe_dup(void) { return 1; }

/* Returns what the next definition after this library returns (2 is right). */
int probe_next(void)
{
	int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "probe_dup");
	return next ? next() : -1;
}
