/*
 * t_devices.c - CUDA ordinals mapped to container devices by UUID: CUDA's
 * fastest-first order differs from NVML's PCI order, CUDA_VISIBLE_DEVICES
 * indices are in CUDA's order, and MIG instances are named by MIG- UUIDs.
 */
#include "test.h"

#include <string.h>

/* The limit libvgpu applies to CUDA device `ord`, as cuDeviceTotalMem_v2 reports it. */
static uint64_t total_of(int ord)
{
	size_t total = 0;
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&total, ord), CUDA_SUCCESS);
	return total;
}

/* Allocates on CUDA device `ord` and returns the container index charged, -1 if none. */
static int charged_index(int ord)
{
	CUdeviceptr p;
	uint64_t before[3];
	t_ctx(ord);
	for (int i = 0; i < 3; i++)
		before[i] = t_mine(i);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 8 * MiB), CUDA_SUCCESS);
	int hit = -1;
	for (int i = 0; i < 3; i++)
		if (t_mine(i) - before[i] == 8 * MiB)
			hit = i;
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	return hit;
}

/*
 * Limits 128m/256m/512m on NVML devices 0/1/2. EXPECT_ORDER lists the NVML
 * device of each CUDA ordinal: "210" when CUDA enumerates fastest first and
 * the fastest is last on the bus (VGPU_STUB_CUDA_ORDER=reverse), "012" with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID.
 */
static int device_order(void)
{
	static const uint64_t limit[3] = {128 * MiB, 256 * MiB, 512 * MiB};
	const char *order = getenv("EXPECT_ORDER");
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	for (int ord = 0; order != NULL && order[ord] != '\0'; ord++) {
		int phys = order[ord] - '0';
		CHECK(total_of(ord) == limit[phys], "CUDA device %d: total %llu, want NVML device %d's %llu",
		      ord, (unsigned long long)total_of(ord), phys, (unsigned long long)limit[phys]);
		CHECK(charged_index(ord) == phys, "CUDA device %d charged to the wrong device", ord);
	}
	return 0;
}

/*
 * CUDA_VISIBLE_DEVICES=0 with CUDA enumerating in reverse: the one visible
 * device is NVML's 2 (limit 96m), not NVML's 0.
 */
static int cvd_order(void)
{
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(total_of(0), 96 * MiB);
	CHECK_EQ(charged_index(0), 2);
	return 0;
}

/*
 * CUDA_VISIBLE_DEVICES=MIG-<uuid of instance 1 of GPU 1> (VGPU_STUB_MIG=1):
 * the instance's limits are GPU 1's (200m), its usage is GPU 1's.
 */
static int cvd_mig(void)
{
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(total_of(0), 200 * MiB);
	CHECK_EQ(charged_index(0), 1);
	return 0;
}

const struct t_case t_device_cases[] = {
	{"device_order", device_order},
	{"cvd_order", cvd_order},
	{"cvd_mig", cvd_mig},
	{NULL, NULL},
};
