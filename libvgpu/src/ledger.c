/*
 * ledger.c - process-local record of every counted allocation.
 *
 * Frees name only a pointer or handle, so the size and device charged at
 * allocation time are kept here and given back exactly (allocate and free are
 * inverses). Open addressing with linear probing and backward-shift deletion;
 * one mutex, never held across a driver call or the region lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct vgpu_entry *table;
static size_t cap;      /* power of two, 0 before first use */
static size_t count;

static size_t slot_of(int kind, uint64_t key)
{
	uint64_t h = (key ^ ((uint64_t)kind << 59)) * UINT64_C(0x9E3779B97F4A7C15);
	return (size_t)(h >> 20) & (cap - 1);
}

static int grow(void)
{
	size_t ncap = cap ? cap * 2 : 256;
	struct vgpu_entry *nt = calloc(ncap, sizeof(*nt));
	if (nt == NULL)
		return -1;
	struct vgpu_entry *old = table;
	size_t ocap = cap;
	table = nt;
	cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].kind == 0)
			continue;
		size_t j = slot_of(old[i].kind, old[i].key);
		while (table[j].kind != 0)
			j = (j + 1) & (cap - 1);
		table[j] = old[i];
	}
	free(old);
	return 0;
}

static struct vgpu_entry *find(int kind, uint64_t key)
{
	if (cap == 0)
		return NULL;
	for (size_t j = slot_of(kind, key);; j = (j + 1) & (cap - 1)) {
		if (table[j].kind == 0)
			return NULL;
		if (table[j].kind == kind && table[j].key == key)
			return &table[j];
	}
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void erase(struct vgpu_entry *e)
{
	size_t i = (size_t)(e - table);
	size_t j = i;
	count--;
	for (;;) {
		table[i].kind = 0;
		for (;;) {
			j = (j + 1) & (cap - 1);
			if (table[j].kind == 0)
				return;
			size_t home = slot_of(table[j].kind, table[j].key);
			/* Move j back to i unless its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		table[i] = table[j];
		i = j;
	}
}

void vgpu_ledger_add(const struct vgpu_entry *e)
{
	pthread_mutex_lock(&mu);
	if ((count + 1) * 2 > cap && grow() != 0) {
		pthread_mutex_unlock(&mu);
		VGPU_LOG(VGPU_LOG_ERROR, "out of host memory for the allocation ledger");
		return;
	}
	struct vgpu_entry *old = find(e->kind, e->key);
	if (old != NULL) {
		*old = *e;  /* the driver reused a handle we missed the free of */
	} else {
		size_t j = slot_of(e->kind, e->key);
		while (table[j].kind != 0)
			j = (j + 1) & (cap - 1);
		table[j] = *e;
		count++;
	}
	pthread_mutex_unlock(&mu);
}

bool vgpu_ledger_take(int kind, uint64_t key, struct vgpu_entry *out)
{
	pthread_mutex_lock(&mu);
	struct vgpu_entry *e = find(kind, key);
	if (e != NULL) {
		*out = *e;
		erase(e);
	}
	pthread_mutex_unlock(&mu);
	return e != NULL;
}

bool vgpu_ledger_take_in(int kind, uint64_t lo, uint64_t hi, struct vgpu_entry *out)
{
	pthread_mutex_lock(&mu);
	struct vgpu_entry *e = find(kind, lo);
	/* The usual range holds one mapping starting at lo; anything else is a scan. */
	for (size_t i = 0; e == NULL && i < cap; i++)
		if (table[i].kind == kind && table[i].key >= lo && table[i].key < hi)
			e = &table[i];
	if (e != NULL) {
		*out = *e;
		erase(e);
	}
	pthread_mutex_unlock(&mu);
	return e != NULL;
}

bool vgpu_ledger_take_owned(int kind, void *owner, struct vgpu_entry *out)
{
	struct vgpu_entry *e = NULL;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; e == NULL && i < cap; i++)
		if (table[i].kind == kind && table[i].owner == owner)
			e = &table[i];
	if (e != NULL) {
		*out = *e;
		erase(e);
	}
	pthread_mutex_unlock(&mu);
	return e != NULL;
}

int vgpu_ledger_vmm_adjust(uint64_t handle, int drefs, int dmaps, struct vgpu_entry *out)
{
	int rc = -1;
	pthread_mutex_lock(&mu);
	struct vgpu_entry *e = find(VGPU_K_VMM, handle);
	if (e != NULL && (int64_t)e->refs + drefs >= 0 && (int64_t)e->maps + dmaps >= 0) {
		e->refs = (uint32_t)((int64_t)e->refs + drefs);
		e->maps = (uint32_t)((int64_t)e->maps + dmaps);
		*out = *e;
		rc = 0;
		if (e->refs == 0 && e->maps == 0) {
			erase(e);
			rc = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

bool vgpu_ledger_set_flags(int kind, uint64_t key, uint16_t flags)
{
	pthread_mutex_lock(&mu);
	struct vgpu_entry *e = find(kind, key);
	if (e != NULL)
		e->flags |= flags;
	pthread_mutex_unlock(&mu);
	return e != NULL;
}

uint64_t vgpu_ledger_purge_owner(void *owner, int idx_out[VGPU_MAX_DEVICES],
				 uint64_t bytes_out[VGPU_MAX_DEVICES])
{
	uint64_t total = 0;
	memset(bytes_out, 0, sizeof(uint64_t) * VGPU_MAX_DEVICES);
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < cap;) {
		struct vgpu_entry *e = &table[i];
		bool ctx_bound = e->kind == VGPU_K_DEVPTR || e->kind == VGPU_K_ARRAY ||
				 e->kind == VGPU_K_MIPMAP || e->kind == VGPU_K_HOST;
		if (e->kind != 0 && ctx_bound && e->owner == owner) {
			/* Exported: importers may keep it past the context (share.c), so its charge stays. */
			if ((e->flags & VGPU_F_EXPORTED) != 0) {
				erase(e);
				continue;
			}
			if (e->idx >= 0 && e->idx < VGPU_MAX_DEVICES)
				bytes_out[e->idx] += e->bytes;
			total += e->bytes;
			erase(e);   /* shifts a later entry into i: look at i again */
			continue;
		}
		i++;
	}
	pthread_mutex_unlock(&mu);
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		idx_out[d] = bytes_out[d] != 0;
	return total;
}

void vgpu_ledger_reset(void)
{
	pthread_mutex_init(&mu, NULL);
	free(table);
	table = NULL;
	cap = 0;
	count = 0;
}
