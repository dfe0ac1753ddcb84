/* probe.c - what a process sees in a container: its pid, the environment,
 * a mounted file, a writable mounted directory. Then it waits for a byte on
 * stdin or exits at once (argv[1] == "exit"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "NSpid:", 6) == 0)
			printf("nspid=%s", line + 7);
	if (f != NULL)
		fclose(f);
	printf("pid=%d\n", getpid());
	printf("env=%s\n", getenv("PROBE_VALUE") ? getenv("PROBE_VALUE") : "");
	f = fopen("/etc/probe.txt", "r");
	if (f != NULL && fgets(line, sizeof(line), f) != NULL)
		printf("file=%s", line);
	if (f != NULL)
		fclose(f);
	f = fopen("/data/out.txt", "w");
	printf("write=%s\n", f != NULL && fputs("written\n", f) >= 0 && fclose(f) == 0 ? "ok" : "failed");
	fflush(stdout);
	if (argc > 1 && strcmp(argv[1], "exit") == 0)
		return 7;
	pause();
	return 0;
}
