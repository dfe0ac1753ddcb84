package allocate

import (
	"google.golang.org/grpc/codes"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

// Sentinel errors of Allocate; test with errors.Is. Allocate returns them
// wrapped in a gRPC status whose code says which class the refusal is in
// (allocation.Status).
var (
	// ErrNoPendingPod: no pod on the node waits for an allocation of the
	// requested size (codes.NotFound, or the code of the refusal when a pod
	// was refused on the way).
	ErrNoPendingPod = allocation.NewRefusal(codes.NotFound, "no pending vGPU pod matches the request")
	// ErrForged: the pod's annotations do not describe an allocation this
	// node can have made (codes.PermissionDenied).
	ErrForged = allocation.ErrForged
	// ErrOverCommit: the allocation, with the node's other vGPU pods,
	// exceeds a card (codes.PermissionDenied).
	ErrOverCommit = allocation.NewRefusal(codes.PermissionDenied, "allocation exceeds a card")
	// ErrStale: the allocation is older than StaleAfter (codes.FailedPrecondition).
	ErrStale = allocation.ErrStale
	// ErrUnhealthy: a card of the allocation is unhealthy (codes.FailedPrecondition).
	ErrUnhealthy = allocation.NewRefusal(codes.FailedPrecondition, "card unhealthy")
	// ErrMIG: the MIG instance could not be provided (codes.FailedPrecondition).
	ErrMIG = allocation.NewRefusal(codes.FailedPrecondition, "MIG instance unavailable")
	// ErrAmbiguous: a pod the scheduler did not place asks for as many
	// cards on the node, so the request may be its admission and not the
	// pending allocation's (codes.FailedPrecondition).
	ErrAmbiguous = allocation.NewRefusal(codes.FailedPrecondition, "request may be for a pod the scheduler did not place")
)
