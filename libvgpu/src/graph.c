/*
 * graph.c - graph memory nodes: cuGraphAddMemAllocNode, and cuMemAllocAsync
 * on a capturing stream (cudaMallocAsync captured into a CUDA graph, as
 * PyTorch's CUDA graphs do with the async allocator), which adds an
 * allocation node instead of allocating (cuMemAllocAsync's note on stream
 * capture; pool.c passes those through).
 *
 * When to charge. The programming guide ("Graph Memory Nodes") has the
 * driver map physical memory to a graph's allocations when the executable
 * graph is launched or uploaded, and keep it with the graph for its next
 * launches until cuDeviceGraphMemTrim or the executable graph's
 * destruction. The footprint is known at instantiation (a graph with memory
 * nodes may have one executable graph at a time, and its nodes are fixed),
 * and instantiation is where an application expects to be refused: so the
 * sum of the allocation nodes is charged at every instantiate entry point
 * (cuGraphInstantiate, _v2, WithFlags, WithParams and its _ptsz), refused
 * with CUDA_ERROR_OUT_OF_MEMORY when it does not fit, and given back at
 * cuGraphExecDestroy. Conservative: the driver may back
 * allocations whose lifetimes do not overlap with the same memory, and a
 * graph that is never launched holds nothing; an allocation the graph does
 * not free outlives cuGraphExecDestroy (until cuMemFree or cuMemFreeAsync)
 * and is no longer counted then.
 *
 * The name cuGraphInstantiate changed meaning, not the symbol: the exported
 * cuGraphInstantiate (CUDA 10.0) and cuGraphInstantiate_v2 (11.0) keep their
 * five arguments in every driver, while CUDA 12's cuda.h maps the name to
 * cuGraphInstantiateWithFlags, which is what cuGetProcAddress answers for it
 * at 12000 and later (procaddr.c, "renamed").
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "hooks.h"

/* One ledger entry per device an executable graph's allocations are on. */
static uint64_t graph_key(CUgraphExec exec, int idx)
{
	return ((uint64_t)(uintptr_t)exec << 4) | (uint64_t)idx;
}

/* Bytes of the graph's allocation nodes per container device; -1 when the driver cannot say. */
static int graph_bytes(CUgraph g, uint64_t bytes[VGPU_MAX_DEVICES])
{
	size_t n = 0;
	memset(bytes, 0, sizeof(uint64_t) * VGPU_MAX_DEVICES);
	if (REAL(cuGraphGetNodes) == NULL || REAL(cuGraphNodeGetType) == NULL ||
	    REAL(cuGraphMemAllocNodeGetParams) == NULL || REAL(cuGraphGetNodes)(g, NULL, &n) != CUDA_SUCCESS)
		return -1;
	if (n == 0)
		return 0;
	CUgraphNode *nodes = calloc(n, sizeof(*nodes));
	if (nodes == NULL || REAL(cuGraphGetNodes)(g, nodes, &n) != CUDA_SUCCESS) {
		free(nodes);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		int type = -1;
		CUDA_MEM_ALLOC_NODE_PARAMS p;
		if (REAL(cuGraphNodeGetType)(nodes[i], &type) != CUDA_SUCCESS ||
		    type != CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
		    REAL(cuGraphMemAllocNodeGetParams)(nodes[i], &p) != CUDA_SUCCESS ||
		    p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			continue;
		int idx = vgpu_dev_index(p.poolProps.location.id);
		if (idx >= 0 && idx < VGPU_MAX_DEVICES)
			bytes[idx] = bytes[idx] > UINT64_MAX - p.bytesize ? UINT64_MAX : bytes[idx] + p.bytesize;
	}
	free(nodes);
	return 0;
}

/* Charges every device's share of the graph; all or nothing. */
static CUresult graph_charge(CUgraph g, uint64_t bytes[VGPU_MAX_DEVICES])
{
	if (!vgpu_counting() || graph_bytes(g, bytes) != 0) {
		memset(bytes, 0, sizeof(uint64_t) * VGPU_MAX_DEVICES);
		return CUDA_SUCCESS;
	}
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		if (bytes[d] == 0)
			continue;
		CUresult res = vgpu_charge(d, bytes[d]);
		if (res != CUDA_SUCCESS) {
			for (int u = 0; u < d; u++)
				if (bytes[u] != 0)
					vgpu_uncharge(u, bytes[u]);
			VGPU_LOG(VGPU_LOG_INFO, "device %d: a graph's allocation nodes need %llu bytes; refused",
				 d, (unsigned long long)bytes[d]);
			return res;
		}
	}
	return CUDA_SUCCESS;
}

static void graph_settle(CUresult res, CUgraphExec *exec, const uint64_t bytes[VGPU_MAX_DEVICES])
{
	for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
		if (bytes[d] == 0)
			continue;
		if (res != CUDA_SUCCESS || exec == NULL) {
			vgpu_uncharge(d, bytes[d]);
			continue;
		}
		struct vgpu_entry e = {.key = graph_key(*exec, d), .bytes = bytes[d], .idx = d,
				       .kind = VGPU_K_GRAPH, .refs = 1};
		vgpu_ledger_add(&e);
	}
}

VGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
						 unsigned long long flags)
{
	uint64_t bytes[VGPU_MAX_DEVICES];
	VGPU_ENTER_CUDA(cuGraphInstantiateWithFlags);
	CUresult res = graph_charge(hGraph, bytes);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuGraphInstantiateWithFlags)(phGraphExec, hGraph, flags);
	graph_settle(res, phGraphExec, bytes);
	return res;
}

/* The five-argument forms; on a refusal the driver's diagnostics say nothing more. */
static CUresult logged(bool v2, CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
		       char *logBuffer, size_t bufferSize)
{
	uint64_t bytes[VGPU_MAX_DEVICES];
	CUresult res = graph_charge(hGraph, bytes);
	if (res != CUDA_SUCCESS) {
		if (phErrorNode != NULL)
			*phErrorNode = NULL;
		if (logBuffer != NULL && bufferSize > 0)
			logBuffer[0] = '\0';
		return res;
	}
	res = v2 ? REAL(cuGraphInstantiate_v2)(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize)
		 : REAL(cuGraphInstantiate)(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
	graph_settle(res, phGraphExec, bytes);
	return res;
}

VGPU_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
					char *logBuffer, size_t bufferSize)
{
	VGPU_ENTER_CUDA(cuGraphInstantiate);
	return logged(false, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

VGPU_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
					   CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	VGPU_ENTER_CUDA(cuGraphInstantiate_v2);
	return logged(true, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult with_params(bool ptsz, CUgraphExec *phGraphExec, CUgraph hGraph,
			    CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	uint64_t bytes[VGPU_MAX_DEVICES];
	CUresult res = graph_charge(hGraph, bytes);
	if (res != CUDA_SUCCESS) {
		if (params != NULL)
			params->result_out = 1;     /* CUDA_GRAPH_INSTANTIATE_ERROR */
		return res;
	}
	res = ptsz ? REAL(cuGraphInstantiateWithParams_ptsz)(phGraphExec, hGraph, params)
		   : REAL(cuGraphInstantiateWithParams)(phGraphExec, hGraph, params);
	graph_settle(res, phGraphExec, bytes);
	return res;
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
						  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	VGPU_ENTER_CUDA(cuGraphInstantiateWithParams);
	return with_params(false, phGraphExec, hGraph, instantiateParams);
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
						       CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	VGPU_ENTER_CUDA(cuGraphInstantiateWithParams_ptsz);
	return with_params(true, phGraphExec, hGraph, instantiateParams);
}

VGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	struct vgpu_entry e[VGPU_MAX_DEVICES];
	bool had[VGPU_MAX_DEVICES];
	VGPU_ENTER_CUDA(cuGraphExecDestroy);
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		had[d] = vgpu_forget(VGPU_K_GRAPH, graph_key(hGraphExec, d), &e[d]);
	CUresult res = REAL(cuGraphExecDestroy)(hGraphExec);
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		vgpu_finish_free(had[d], &e[d], res);
	return res;
}

bool vgpu_stream_capturing(CUstream stream, bool ptsz)
{
	int status = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult (*fn)(CUstream, int *) = ptsz ? REAL(cuStreamIsCapturing_ptsz) : REAL(cuStreamIsCapturing);
	if (fn == NULL)
		fn = REAL(cuStreamIsCapturing);
	/* An error (no such stream, an illegal query during capture) is not "capturing": count. */
	return fn != NULL && fn(stream, &status) == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}
