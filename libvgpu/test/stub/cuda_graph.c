/*
 * cuda_graph.c - stub graph memory nodes and stream capture.
 *
 * CUDA Driver API reference, "Graph Management" (cuGraphAddMemAllocNode,
 * cuGraphAddMemFreeNode, cuGraphInstantiate, cuGraphExecDestroy) and the
 * programming guide's "Graph Memory Nodes":
 *  - an allocation node gets its address when it is created, and the
 *    address stays fixed across instantiations and launches; no physical
 *    memory is behind it yet;
 *  - physical memory is mapped when the executable graph is launched (or
 *    uploaded), and the graph keeps it for its next launches (the driver
 *    returns it to the OS only on cuDeviceGraphMemTrim or when the
 *    executable graph is destroyed); a launch the device cannot back fails
 *    with CUDA_ERROR_OUT_OF_MEMORY;
 *  - an allocation that the graph does not free outlives the launch and is
 *    freed by cuMemFreeAsync or cuMemFree (or a free node of another graph);
 *  - a graph with memory nodes may have one executable graph at a time.
 * cuMemAllocAsync on a capturing stream (cuStreamBeginCapture) does not
 * allocate: it adds an allocation node to the graph being captured, owned
 * by the graph rather than the pool (cuMemAllocAsync's note on stream
 * capture), and cuMemFreeAsync adds a free node.
 *
 * Not modelled: dependencies (nodes run in creation order), child graphs,
 * trimming (the memory stays with the executable graph until it is
 * destroyed), cuGraphUpload, and memory reuse between allocations of one
 * graph: each allocation node is backed by memory of its own.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stub_int.h"

#ifndef STUB_MINIMAL
#define MAX_GRAPHS 64
#define MAX_NODES 64

struct gnode {
	int type;               /* CU_GRAPH_NODE_TYPE_MEM_ALLOC or _MEM_FREE; 0: another kind */
	int phys;
	uint64_t dptr, size;
	int outstanding;        /* allocated by a launch, not freed yet (no free node) */
	int committed;          /* backed by device memory */
};

struct graph {
	int alive;
	int execs;              /* live executable graphs */
	int n;
	struct gnode nodes[MAX_NODES];
};

struct gexec {
	struct graph *g;        /* NULL: free */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct graph graphs[MAX_GRAPHS];
static struct gexec execs[MAX_GRAPHS];
static struct { CUstream s; struct graph *g; int on; } captures[16];
static uint64_t next_va = UINT64_C(0x7c0000000000);

static struct graph *graph_of(CUgraph h)
{
	struct graph *g = (struct graph *)h;
	return g >= graphs && g < graphs + MAX_GRAPHS && g->alive ? g : NULL;
}

static struct graph *new_graph_locked(void)
{
	for (int i = 0; i < MAX_GRAPHS; i++)
		if (!graphs[i].alive && graphs[i].execs == 0) {
			memset(&graphs[i], 0, sizeof(graphs[i]));
			graphs[i].alive = 1;
			return &graphs[i];
		}
	return NULL;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	STUB_NEED_INIT();
	if (phGraph == NULL || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	struct graph *g = new_graph_locked();
	pthread_mutex_unlock(&mu);
	if (g == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

static CUresult add_locked(struct graph *g, struct gnode n, CUgraphNode *out)
{
	if (g->n == MAX_NODES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->nodes[g->n] = n;
	if (out != NULL)
		*out = (CUgraphNode)&g->nodes[g->n];
	g->n++;
	return CUDA_SUCCESS;
}

static CUresult add_alloc_locked(struct graph *g, int phys, uint64_t size, CUdeviceptr *dptr,
				 CUgraphNode *out)
{
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t va = next_va;
	CUresult res = add_locked(g, (struct gnode){CU_GRAPH_NODE_TYPE_MEM_ALLOC, phys, va, size, 0, 0}, out);
	if (res == CUDA_SUCCESS) {
		next_va += (size + 0x1fffff) & ~UINT64_C(0x1fffff);
		*dptr = va;
	}
	return res;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	(void)dependencies, (void)numDependencies;
	STUB_NEED_INIT();
	if (phGraphNode == NULL || nodeParams == NULL ||
	    nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	int phys = stub_phys(nodeParams->poolProps.location.id);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	struct graph *g = graph_of(hGraph);
	CUresult res = g == NULL ? CUDA_ERROR_INVALID_VALUE
				 : add_alloc_locked(g, phys, nodeParams->bytesize, &nodeParams->dptr, phGraphNode);
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			       size_t numDependencies, CUdeviceptr dptr)
{
	(void)dependencies, (void)numDependencies;
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	struct graph *g = graph_of(hGraph);
	CUresult res = g == NULL ? CUDA_ERROR_INVALID_VALUE
				 : add_locked(g, (struct gnode){CU_GRAPH_NODE_TYPE_MEM_FREE, -1, dptr, 0, 0, 0},
					      phGraphNode);
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	STUB_NEED_INIT();
	if (numNodes == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	struct graph *g = graph_of(hGraph);
	if (g == NULL) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* With nodes, up to *numNodes are returned and *numNodes is how many. */
	size_t n = (size_t)g->n;
	if (nodes != NULL) {
		n = n < *numNodes ? n : *numNodes;
		for (size_t i = 0; i < n; i++)
			nodes[i] = (CUgraphNode)&g->nodes[i];
	}
	*numNodes = n;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, int *type)
{
	STUB_NEED_INIT();
	if (hNode == NULL || type == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*type = ((struct gnode *)hNode)->type;
	return CUDA_SUCCESS;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	STUB_NEED_INIT();
	struct gnode *n = (struct gnode *)hNode;
	if (n == NULL || params_out == NULL || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		return CUDA_ERROR_INVALID_VALUE;
	memset(params_out, 0, sizeof(*params_out));
	params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	/* The device as CUDA numbers it: the first ordinal showing this card. */
	for (int d = 0; d < STUB_MAX_DEV; d++)
		if (stub_phys(d) == n->phys) {
			params_out->poolProps.location.id = d;
			break;
		}
	params_out->bytesize = n->size;
	params_out->dptr = n->dptr;
	return CUDA_SUCCESS;
}

static int has_memory_nodes(const struct graph *g)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_FREE)
			return 1;
	return 0;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
	STUB_NEED_INIT();
	if (phGraphExec == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	struct graph *g = graph_of(hGraph);
	CUresult res = CUDA_ERROR_INVALID_VALUE;
	if (g != NULL && !(g->execs > 0 && has_memory_nodes(g))) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		for (int i = 0; i < MAX_GRAPHS; i++)
			if (execs[i].g == NULL) {
				execs[i].g = g;
				g->execs++;
				*phGraphExec = (CUgraphExec)&execs[i];
				res = CUDA_SUCCESS;
				break;
			}
	}
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	(void)flags;
	return instantiate(phGraphExec, hGraph);
}

/*
 * The two old entry points, exported by every driver since CUDA 10.0 and
 * 11.0 with this signature (the error node and log buffer are the driver's
 * diagnostics: none here, so the buffer is left an empty string).
 */
static CUresult instantiate_logged(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				   char *logBuffer, size_t bufferSize)
{
	if (phErrorNode != NULL)
		*phErrorNode = NULL;
	if (logBuffer != NULL && bufferSize > 0)
		logBuffer[0] = '\0';
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			    char *logBuffer, size_t bufferSize)
{
	return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			       char *logBuffer, size_t bufferSize)
{
	return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	CUresult res = instantiate(phGraphExec, hGraph);
	if (instantiateParams != NULL)
		instantiateParams->result_out = res == CUDA_SUCCESS ? 0 : 1;    /* CUDA_GRAPH_INSTANTIATE_SUCCESS / _ERROR */
	return res;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
					   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

static struct gexec *exec_of(CUgraphExec h)
{
	struct gexec *e = (struct gexec *)h;
	return e >= execs && e < execs + MAX_GRAPHS && e->g != NULL ? e : NULL;
}

/*
 * A launch backs every allocation node not backed yet; all or nothing. Nodes
 * the graph frees keep their memory for the next launch; the others become
 * outstanding allocations, which a later cuMemFreeAsync or cuMemFree frees.
 */
CUresult stub_graph_commit(CUgraphExec h)
{
	pthread_mutex_lock(&mu);
	struct gexec *e = exec_of(h);
	if (e == NULL) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct graph *g = e->g;
	CUresult res = CUDA_SUCCESS;
	int i;
	for (i = 0; i < g->n && res == CUDA_SUCCESS; i++) {
		struct gnode *n = &g->nodes[i];
		if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->committed)
			continue;
		if (n->outstanding) {
			res = CUDA_ERROR_INVALID_VALUE;     /* last launch's allocation not freed yet */
			break;
		}
		res = stub_dev_charge(n->phys, n->size);
		if (res == CUDA_SUCCESS)
			n->committed = 1;
	}
	if (res != CUDA_SUCCESS) {
		pthread_mutex_unlock(&mu);
		return res;         /* what was backed stays with the graph */
	}
	for (i = 0; i < g->n; i++) {
		struct gnode *n = &g->nodes[i];
		int freed = 0;
		if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			continue;
		for (int j = i + 1; j < g->n; j++)
			freed |= g->nodes[j].type == CU_GRAPH_NODE_TYPE_MEM_FREE && g->nodes[j].dptr == n->dptr;
		if (!freed)
			n->outstanding = 1;
	}
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

int stub_graph_free(CUdeviceptr dptr)
{
	int found = 0;
	uint64_t size = 0;
	int phys = -1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_GRAPHS && !found; i++)
		for (int k = 0; k < graphs[i].n && !found; k++) {
			struct gnode *n = &graphs[i].nodes[k];
			if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->outstanding && n->dptr == dptr) {
				n->outstanding = 0;
				n->committed = 0;
				size = n->size;
				phys = n->phys;
				found = 1;
			}
		}
	pthread_mutex_unlock(&mu);
	if (found)
		stub_dev_release(phys, size);
	return found;
}

/* Releases what the graph keeps for its launches; outstanding allocations stay until freed. */
static void release_graph_memory_locked(struct graph *g)
{
	for (int i = 0; i < g->n; i++) {
		struct gnode *n = &g->nodes[i];
		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->committed && !n->outstanding) {
			stub_dev_release(n->phys, n->size);
			n->committed = 0;
		}
	}
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	struct gexec *e = exec_of(hGraphExec);
	if (e == NULL) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	release_graph_memory_locked(e->g);
	e->g->execs--;
	e->g = NULL;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	struct graph *g = graph_of(hGraph);
	if (g != NULL)
		g->alive = 0;   /* its executable graphs live on */
	pthread_mutex_unlock(&mu);
	return g != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- stream capture ---- */

static int capture_slot_locked(CUstream s)
{
	for (int i = 0; i < 16; i++)
		if (captures[i].on && captures[i].s == s)
			return i;
	return -1;
}

int stub_capturing(CUstream s)
{
	pthread_mutex_lock(&mu);
	int on = capture_slot_locked(s) >= 0;
	pthread_mutex_unlock(&mu);
	return on;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode)
{
	(void)mode;
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	CUresult res = CUDA_ERROR_OUT_OF_MEMORY;
	if (capture_slot_locked(hStream) >= 0) {
		res = CUDA_ERROR_INVALID_VALUE;     /* already capturing */
	} else {
		for (int i = 0; i < 16; i++)
			if (!captures[i].on) {
				struct graph *g = new_graph_locked();
				if (g == NULL)
					break;
				captures[i].s = hStream;
				captures[i].g = g;
				captures[i].on = 1;
				res = CUDA_SUCCESS;
				break;
			}
	}
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuStreamBeginCapture(CUstream hStream) { return cuStreamBeginCapture_v2(hStream, 0); }

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	STUB_NEED_INIT();
	if (phGraph == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	int i = capture_slot_locked(hStream);
	if (i >= 0) {
		*phGraph = (CUgraph)captures[i].g;
		captures[i].on = 0;
	}
	pthread_mutex_unlock(&mu);
	return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamIsCapturing(CUstream hStream, int *captureStatus)
{
	STUB_NEED_INIT();
	if (captureStatus == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*captureStatus = stub_capturing(hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, int *captureStatus)
{
	return cuStreamIsCapturing(hStream, captureStatus);
}

CUresult stub_capture_alloc(CUstream s, CUdeviceptr *dptr, uint64_t size, int phys)
{
	if (dptr == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	int i = capture_slot_locked(s);
	CUresult res = i < 0 ? CUDA_ERROR_INVALID_VALUE : add_alloc_locked(captures[i].g, phys, size, dptr, NULL);
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult stub_capture_free(CUstream s, CUdeviceptr dptr)
{
	pthread_mutex_lock(&mu);
	int i = capture_slot_locked(s);
	CUresult res = i < 0 ? CUDA_ERROR_INVALID_VALUE
			     : add_locked(captures[i].g, (struct gnode){CU_GRAPH_NODE_TYPE_MEM_FREE, -1, dptr, 0, 0, 0}, NULL);
	pthread_mutex_unlock(&mu);
	return res;
}
#else
int stub_graph_free(CUdeviceptr dptr) { (void)dptr; return 0; }
CUresult stub_graph_commit(CUgraphExec h) { (void)h; return CUDA_SUCCESS; }
#endif /* STUB_MINIMAL */
