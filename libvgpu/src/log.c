/* log.c - formatting and level parsing for VGPU_LOG (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vgpu_log_level_cache = -1;

/*
 * Reads LIBCUDA_LOG_LEVEL once. Concurrent first calls may both parse the
 * variable; they compute the same value, so the race is harmless.
 */
int vgpu_log_level_load(void)
{
	const char *value = getenv("LIBCUDA_LOG_LEVEL");
	int level = VGPU_LOG_WARN;
	int invalid = 0;

	if (value != NULL && value[0] != '\0') {
		char *end = NULL;
		long parsed = strtol(value, &end, 10);
		if (end == value || *end != '\0' || parsed < 0)
			invalid = 1;
		else
			level = parsed > VGPU_LOG_TRACE ? VGPU_LOG_TRACE : (int)parsed;
	}
	__atomic_store_n(&vgpu_log_level_cache, level, __ATOMIC_RELAXED);
	if (invalid)
		vgpu_log_write(VGPU_LOG_WARN,
			       "LIBCUDA_LOG_LEVEL=\"%s\" ignored: want an integer 0 (errors) to 4 (trace)",
			       value);
	return level;
}

void vgpu_log_write(int level, const char *fmt, ...)
{
	static const char tags[] = "EWIDT";
	char line[512];
	int n = snprintf(line, sizeof(line), "[libvgpu %d] %c: ", (int)getpid(),
			 tags[level < 0 ? 0 : (level > 4 ? 4 : level)]);
	va_list ap;

	if (n < 0)
		return;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = strnlen(line, sizeof(line) - 2);
	line[len++] = '\n';
	/* Best effort: a failed write to stderr must not disturb the host. */
	ssize_t ignored = write(STDERR_FILENO, line, len);
	(void)ignored;
}
