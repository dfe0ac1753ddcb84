/*
 * log.h - the library's single logging macro.
 *
 * LIBCUDA_LOG_LEVEL is read once, on the first log call, and cached: the
 * library runs inside every process of the container, so it must not call
 * getenv() per message. Messages go to stderr with one write(2) each so that
 * lines from concurrent threads and processes do not interleave.
 */
#ifndef VGPU_LOG_H
#define VGPU_LOG_H

enum vgpu_log_level {
	VGPU_LOG_ERROR = 0,
	VGPU_LOG_WARN = 1,      /* default */
	VGPU_LOG_INFO = 2,
	VGPU_LOG_DEBUG = 3,
	VGPU_LOG_TRACE = 4,
};

/* Cached level; negative until the first call reads the environment. */
extern int vgpu_log_level_cache;

int vgpu_log_level_load(void);
void vgpu_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline int vgpu_log_level(void)
{
	int level = __atomic_load_n(&vgpu_log_level_cache, __ATOMIC_RELAXED);
	return level >= 0 ? level : vgpu_log_level_load();
}

/* VGPU_LOG(level, fmt, ...): printf-checked, skipped cheaply when filtered. */
#define VGPU_LOG(level, ...)                                                   \
	do {                                                                   \
		if ((level) <= vgpu_log_level())                               \
			vgpu_log_write((level), __VA_ARGS__);                  \
	} while (0)

#endif /* VGPU_LOG_H */
