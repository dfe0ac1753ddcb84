/* probe2.c - the definition RTLD_NEXT from libprobe1 must find. */
int probe_dup(void) { return 2; }
