/*
 * t_graph.c - memory a CUDA graph allocates (issue 34): graph memory nodes
 * (cuGraphAddMemAllocNode), cuMemAllocAsync captured from a stream into a
 * graph, as PyTorch's CUDA graphs use it, and every instantiate entry point
 * they are charged at. The rule under test is t_share.c's: a byte counted
 * once, on the process that allocated it, while the driver keeps it.
 */
#define _GNU_SOURCE
#include "test.h"

#include <stdbool.h>
#include <string.h>

/* Extra driver entry points these cases call, as cuda.h declares them. */
CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags);
CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
				size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams);
CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
			       size_t n, CUdeviceptr dptr);
CUresult cuGraphDestroy(CUgraph hGraph);
CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode);
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);

/* ---- graph memory nodes ---- */

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(uint64_t bytes)
{
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = 0;
	p.bytesize = bytes;
	return p;
}

/*
 * cuGraphAddMemAllocNode: no hook saw graph memory before. It is charged
 * once, when the graph is instantiated (its footprint is fixed then; the
 * driver backs it at launch), and given back with the executable graph.
 */
static int graph_mem_nodes(void)
{
	CUgraph g, g2;
	CUgraphNode an, fn;
	CUgraphExec e, e2;
	CUdeviceptr b;
	t_ctx(0);
	CHECK_EQ(STUB(cuGraphCreate)(&g, 0), CUDA_SUCCESS);
	CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(600 * MiB);
	CHECK_EQ(STUB(cuGraphAddMemAllocNode)(&an, g, NULL, 0, &p), CUDA_SUCCESS);
	CHECK(p.dptr != 0, "the allocation node has its address");
	CHECK_EQ(STUB(cuGraphAddMemFreeNode)(&fn, g, &an, 1, p.dptr), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);                         /* a graph is no memory yet */
	CHECK_EQ(CU(cuGraphInstantiateWithFlags)(&e, g, 0), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 600 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 500 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuGraphLaunch)(e, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuGraphLaunch)(e, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 600 * MiB);                 /* relaunching reuses the graph's memory */
	/* A second graph that does not fit with the first is refused at instantiation. */
	CHECK_EQ(STUB(cuGraphCreate)(&g2, 0), CUDA_SUCCESS);
	CUDA_MEM_ALLOC_NODE_PARAMS p2 = alloc_params(500 * MiB);
	CHECK_EQ(STUB(cuGraphAddMemAllocNode)(&an, g2, NULL, 0, &p2), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphAddMemFreeNode)(&fn, g2, &an, 1, p2.dptr), CUDA_SUCCESS);
	CHECK_EQ(CU(cuGraphInstantiateWithFlags)(&e2, g2, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
	CHECK_EQ(CU(cuGraphInstantiateWithParams)(&e2, g2, &ip), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(t_mine(0), 600 * MiB);
	t_no_violation();
	CHECK_EQ(CU(cuGraphExecDestroy)(e), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(t_device_used(0), 0);
	CHECK_EQ(CU(cuGraphInstantiateWithParams)(&e2, g2, &ip), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 500 * MiB);
	CHECK_EQ(CU(cuGraphLaunch)(e2, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuGraphExecDestroy)(e2), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 900 * MiB), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphDestroy)(g), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphDestroy)(g2), CUDA_SUCCESS);
	t_no_violation();
	return t_failed;
}

/*
 * cudaMallocAsync captured into a CUDA graph (PyTorch's CUDA graphs with the
 * async allocator): during capture cuMemAllocAsync allocates nothing, it
 * adds an allocation node; the memory is the graph's, charged like graph_mem_nodes.
 */
static int graph_capture(void)
{
	CUstream s = (CUstream)(uintptr_t)0x5000;     /* any stream handle: the stub keys capture by it */
	CUgraph g;
	CUgraphExec e;
	CUdeviceptr p, b;
	t_ctx(0);
	CHECK_EQ(STUB(cuStreamBeginCapture_v2)(s, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocAsync)(&p, 600 * MiB, s), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);                         /* nothing allocated while capturing */
	CHECK_EQ(CU(cuMemFreeAsync)(p, s), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuStreamEndCapture)(s, &g), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	/* As the CUDA 12 runtime reaches it: through cuGetProcAddress. */
	void *fn = NULL;
	CHECK_EQ(CU(cuGetProcAddress_v2)("cuGraphInstantiateWithFlags", &fn, 12000, 0, NULL), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags"), "cuGetProcAddress hands out the hook");
	CUresult (*inst)(CUgraphExec *, CUgraph, unsigned long long) = (__typeof__(inst))fn;
	CHECK(inst != NULL && inst(&e, g, 0) == CUDA_SUCCESS, "instantiated");
	CHECK_EQ(t_mine(0), 600 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 500 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemAllocAsync)(&b, 500 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuGraphLaunch)(e, NULL), CUDA_SUCCESS);
	t_no_violation();
	CHECK_EQ(CU(cuGraphExecDestroy)(e), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(t_device_used(0), 0);
	CHECK_EQ(STUB(cuGraphDestroy)(g), CUDA_SUCCESS);
	return t_failed;
}

/*
 * Every way a runtime reaches graph instantiation. By symbol: the two old
 * names (CUDA 10.0 and 11.0, five arguments in every driver), WithFlags,
 * WithParams and its per-thread variant. Through cuGetProcAddress(_v2), with
 * the versions CUDA 11.x and 12.x runtimes ask at: "cuGraphInstantiate" is
 * cuGraphInstantiate_v2 for 11.x and, since CUDA 12's cuda.h maps the name to
 * cuGraphInstantiateWithFlags, that function for 12.x.
 */
enum inst_form { INST_LOGGED, INST_FLAGS, INST_PARAMS };

struct inst_way {
	const char *name;
	int gpa;                /* 0: dlsym; 1: cuGetProcAddress; 2: cuGetProcAddress_v2 */
	int version;
	cuuint64_t flags;
	enum inst_form form;
};

static const struct inst_way inst_ways[] = {
	{"cuGraphInstantiate", 0, 0, 0, INST_LOGGED},
	{"cuGraphInstantiate_v2", 0, 0, 0, INST_LOGGED},
	{"cuGraphInstantiateWithFlags", 0, 0, 0, INST_FLAGS},
	{"cuGraphInstantiateWithParams", 0, 0, 0, INST_PARAMS},
	{"cuGraphInstantiateWithParams_ptsz", 0, 0, 0, INST_PARAMS},
	{"cuGraphInstantiate", 1, 10000, 0, INST_LOGGED},
	{"cuGraphInstantiate", 1, 11000, 0, INST_LOGGED},
	{"cuGraphInstantiate", 1, 11080, 0, INST_LOGGED},
	{"cuGraphInstantiate", 1, 12000, 0, INST_FLAGS},
	{"cuGraphInstantiate", 2, 12000, 0, INST_FLAGS},
	{"cuGraphInstantiate", 2, 12080, 0, INST_FLAGS},
	{"cuGraphInstantiate", 2, 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, INST_FLAGS},
	{"cuGraphInstantiateWithFlags", 1, 11040, 0, INST_FLAGS},
	{"cuGraphInstantiateWithFlags", 2, 12040, 0, INST_FLAGS},
	{"cuGraphInstantiateWithParams", 2, 12000, 0, INST_PARAMS},
	{"cuGraphInstantiateWithParams", 2, 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, INST_PARAMS},
};

static void *inst_fn(const struct inst_way *w)
{
	void *fn = NULL;
	if (w->gpa == 0)
		return t_sym("libcuda.so.1", w->name);
	CUresult res = w->gpa == 1 ? CU(cuGetProcAddress)(w->name, &fn, w->version, w->flags)
				   : CU(cuGetProcAddress_v2)(w->name, &fn, w->version, w->flags, NULL);
	return res == CUDA_SUCCESS ? fn : NULL;
}

static CUresult inst_call(const struct inst_way *w, void *fn, CUgraphExec *e, CUgraph g)
{
	char log[64];
	CUgraphNode err;
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
	switch (w->form) {
	case INST_LOGGED:
		return ((__typeof__(&cuGraphInstantiate_v2))fn)(e, g, &err, log, sizeof(log));
	case INST_FLAGS:
		return ((__typeof__(&cuGraphInstantiateWithFlags))fn)(e, g, 0);
	default:
		return ((__typeof__(&cuGraphInstantiateWithParams))fn)(e, g, &ip);
	}
}

static CUgraph graph_of_bytes(uint64_t bytes)
{
	CUgraph g = NULL;
	CUgraphNode an, fn;
	CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(bytes);
	CHECK_EQ(STUB(cuGraphCreate)(&g, 0), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphAddMemAllocNode)(&an, g, NULL, 0, &p), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphAddMemFreeNode)(&fn, g, &an, 1, p.dptr), CUDA_SUCCESS);
	return g;
}

/* Each way charges a graph that fits, refuses one that does not, and gives the charge back. */
static int graph_instantiate_entries(void)
{
	t_ctx(0);
	CUgraph fits = graph_of_bytes(600 * MiB), over = graph_of_bytes(1200 * MiB);
	for (size_t i = 0; i < sizeof(inst_ways) / sizeof(inst_ways[0]); i++) {
		const struct inst_way *w = &inst_ways[i];
		void *fn = inst_fn(w);
		CUgraphExec e = NULL;
		CHECK(fn != NULL, "%s (lookup %d at %d) resolves", w->name, w->gpa, w->version);
		if (fn == NULL)
			continue;
		CUresult res = inst_call(w, fn, &e, fits);
		CHECK(res == CUDA_SUCCESS, "%s (lookup %d at %d): %d", w->name, w->gpa, w->version, res);
		CHECK(t_mine(0) == 600 * MiB, "%s (lookup %d at %d, flags %llu) charged %llu bytes, not 600 MiB",
		      w->name, w->gpa, w->version, (unsigned long long)w->flags, (unsigned long long)t_mine(0));
		if (res == CUDA_SUCCESS)
			CHECK_EQ(CU(cuGraphExecDestroy)(e), CUDA_SUCCESS);
		CHECK_EQ(t_mine(0), 0);
		res = inst_call(w, fn, &e, over);
		CHECK(res == CUDA_ERROR_OUT_OF_MEMORY, "%s (lookup %d at %d) instantiated 1200 MiB under a 1 GiB limit",
		      w->name, w->gpa, w->version);
		if (res == CUDA_SUCCESS)
			CHECK_EQ(CU(cuGraphExecDestroy)(e), CUDA_SUCCESS);
	}
	t_no_violation();
	CHECK_EQ(STUB(cuGraphDestroy)(fits), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuGraphDestroy)(over), CUDA_SUCCESS);
	return t_failed;
}

const struct t_case t_graph_cases[] = {
	{"graph_mem_nodes", graph_mem_nodes},
	{"graph_capture", graph_capture},
	{"graph_instantiate_entries", graph_instantiate_entries},
	{NULL, NULL},
};
