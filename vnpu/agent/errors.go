package agent

import (
	"google.golang.org/grpc/codes"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

// Sentinel errors of Allocate; test with errors.Is. Allocate returns them
// wrapped in a gRPC status whose code names the class of the refusal
// (allocation.Status).
var (
	// ErrNoPendingPod: no pod on the node waits for an allocation of the
	// requested size (codes.NotFound).
	ErrNoPendingPod = allocation.NewRefusal(codes.NotFound, "no pending Ascend pod matches the request")
	// ErrNotBound: the pod carrying the allocation is not bound to this
	// node (codes.PermissionDenied).
	ErrNotBound = allocation.ErrNotBound
	// ErrForged: the allocation annotations describe an allocation this
	// node cannot have been given (codes.PermissionDenied).
	ErrForged = allocation.ErrForged
	// ErrStale: the allocation is older than the allocation timeout
	// (codes.FailedPrecondition).
	ErrStale = allocation.ErrStale
	// ErrNotAllocating: the pod's bind-phase is not allocating
	// (codes.FailedPrecondition).
	ErrNotAllocating = allocation.ErrNotAllocating
	// ErrUnhealthy: a chip of the allocation is unhealthy
	// (codes.FailedPrecondition).
	ErrUnhealthy = allocation.NewRefusal(codes.FailedPrecondition, "chip unhealthy")
	// ErrUnknownDevice: the kubelet asked for a device ID this agent never
	// advertised (codes.InvalidArgument).
	ErrUnknownDevice = allocation.NewRefusal(codes.InvalidArgument, "unknown device ID")
)
