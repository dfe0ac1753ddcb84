package agent

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors of Allocate; test with errors.Is. Allocate returns them
// wrapped in a gRPC status whose code names the class of the refusal.
var (
	// ErrNoPendingPod: no pod on the node waits for an allocation of the
	// requested size (codes.NotFound).
	ErrNoPendingPod = errors.New("no pending Ascend pod matches the request")
	// ErrNotBound: the pod carrying the allocation is not bound to this
	// node (codes.PermissionDenied).
	ErrNotBound = errors.New("pod not bound to this node")
	// ErrForged: the allocation annotations describe an allocation this
	// node cannot have been given (codes.PermissionDenied).
	ErrForged = errors.New("allocation annotations refused")
	// ErrStale: the allocation is older than the allocation timeout
	// (codes.FailedPrecondition).
	ErrStale = errors.New("stale allocation")
	// ErrNotAllocating: the pod's bind-phase is not allocating
	// (codes.FailedPrecondition).
	ErrNotAllocating = errors.New("bind-phase is not allocating")
	// ErrUnhealthy: a chip of the allocation is unhealthy
	// (codes.FailedPrecondition).
	ErrUnhealthy = errors.New("chip unhealthy")
	// ErrUnknownDevice: the kubelet asked for a device ID this agent never
	// advertised (codes.InvalidArgument).
	ErrUnknownDevice = errors.New("unknown device ID")
)

// toStatus wraps err in a gRPC status with the code of its class.
func toStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, ErrForged), errors.Is(err, ErrNotBound):
		code = codes.PermissionDenied
	case errors.Is(err, ErrStale), errors.Is(err, ErrUnhealthy), errors.Is(err, ErrNotAllocating):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrUnknownDevice):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNoPendingPod):
		code = codes.NotFound
	}
	return status.Error(code, err.Error())
}
