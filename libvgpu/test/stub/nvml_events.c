/*
 * nvml_events.c - the stub NVML's event sets ("Event Handling Methods" in
 * the NVML API reference, https://docs.nvidia.com/deploy/nvml-api/). In
 * remote mode a set is a connection of its own to the fake driver
 * (cuda_remote_events.c), which delivers the Xid errors a test injects
 * (Driver.InjectXid); the cards support Xid events only. In local mode no
 * event ever comes.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "nvml_stub.h"

#define SET_MAGIC UINT64_C(0x4e564d4c45564e54)

struct nvmlEventSet_st {
	uint64_t magic;
	struct stub_evset *ev;
};

static int valid_set(nvmlEventSet_t set) { return set != NULL && set->magic == SET_MAGIC; }

/*
 * nvmlDeviceGetSupportedEventTypes: "Returns information about events
 * supported on device".
 */
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc == NVML_SUCCESS && eventTypes == NULL)
		rc = NVML_ERROR_INVALID_ARGUMENT;
	if (rc == NVML_SUCCESS && (rc = stub_nvml_facts(i, &f)) == NVML_SUCCESS)
		*eventTypes = f.event_types;
	return rc;
}

/* nvmlEventSetCreate: "Create an empty set of events". */
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (set == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct nvmlEventSet_st *s = malloc(sizeof(*s));
	if (s == NULL)
		return NVML_ERROR_UNKNOWN;
	if ((s->ev = stub_evset_new()) == NULL) {
		free(s);
		return NVML_ERROR_UNKNOWN;
	}
	s->magic = SET_MAGIC;
	*set = s;
	return NVML_SUCCESS;
}

/*
 * nvmlDeviceRegisterEvents: "All events that occurred before this call are
 * not recorded"; NVML_ERROR_INVALID_ARGUMENT "if eventTypes is invalid or
 * set is NULL"; NVML_ERROR_NOT_SUPPORTED "if the platform does not support
 * this feature or some of requested event types", in which case "None of
 * the requested eventTypes are registered"; NVML_ERROR_UNKNOWN "on any
 * unexpected error" (the driver did not answer).
 */
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
	struct stub_facts f;
	int i;
	nvmlReturn_t rc = stub_nvml_check(device, &i);
	if (rc != NVML_SUCCESS)
		return rc;
	if (!valid_set(set) || (eventTypes & ~STUB_EVENT_TYPES_ALL) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((rc = stub_nvml_facts(i, &f)) != NVML_SUCCESS)
		return rc;
	if ((eventTypes & ~f.event_types) != 0)
		return NVML_ERROR_NOT_SUPPORTED;
	return stub_evset_register(set->ev, i, eventTypes) == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/*
 * nvmlEventSetWait_v2: "If some events are ready to be delivered at the
 * time of the call, function returns immediately. If there are no events
 * ready to be delivered, function sleeps till event arrives but not longer
 * than specified timeout"; NVML_ERROR_TIMEOUT "if no event arrived in
 * specified timeout". The Xid is the event data; gpuInstanceId and
 * computeInstanceId are 0xFFFFFFFF, the event being the whole card's.
 */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	int phys;
	uint64_t type, value;
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (!valid_set(set) || data == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	switch (stub_evset_wait(set->ev, timeoutms, &phys, &type, &value)) {
	case 0:
		return NVML_ERROR_TIMEOUT;
	case 1:
		*data = (nvmlEventData_t){.device = stub_nvml_handle(phys), .eventType = type, .eventData = value,
					  .gpuInstanceId = 0xFFFFFFFFu, .computeInstanceId = 0xFFFFFFFFu};
		return NVML_SUCCESS;
	}
	return NVML_ERROR_UNKNOWN;
}

/* nvmlEventSetWait, the first version: the same answers (on Linux every Xid is delivered). */
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	return nvmlEventSetWait_v2(set, data, timeoutms);
}

/* nvmlEventSetFree: "Releases events in the set". */
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	if (!stub_nvml_inited())
		return NVML_ERROR_UNINITIALIZED;
	if (!valid_set(set))
		return NVML_ERROR_UNKNOWN;
	set->magic = 0;
	stub_evset_free(set->ev);
	free(set);
	return NVML_SUCCESS;
}
