package allocate

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors of Allocate; test with errors.Is. Allocate returns them
// wrapped in a gRPC status whose code says which class the refusal is in.
var (
	// ErrNoPendingPod: no pod on the node waits for an allocation of the
	// requested size (codes.NotFound, or the code of the refusal when a pod
	// was refused on the way).
	ErrNoPendingPod = errors.New("no pending vGPU pod matches the request")
	// ErrForged: the pod's annotations do not describe an allocation this
	// node can have made (codes.PermissionDenied).
	ErrForged = errors.New("allocation annotations refused")
	// ErrOverCommit: the allocation, with the node's other vGPU pods,
	// exceeds a card (codes.PermissionDenied).
	ErrOverCommit = errors.New("allocation exceeds a card")
	// ErrStale: the allocation is older than StaleAfter (codes.FailedPrecondition).
	ErrStale = errors.New("stale allocation")
	// ErrUnhealthy: a card of the allocation is unhealthy (codes.FailedPrecondition).
	ErrUnhealthy = errors.New("card unhealthy")
	// ErrMIG: the MIG instance could not be provided (codes.FailedPrecondition).
	ErrMIG = errors.New("MIG instance unavailable")
	// ErrAmbiguous: a pod the scheduler did not place asks for as many
	// cards on the node, so the request may be its admission and not the
	// pending allocation's (codes.FailedPrecondition).
	ErrAmbiguous = errors.New("request may be for a pod the scheduler did not place")
)

// toStatus wraps err in a gRPC status with the code of its class.
func toStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, ErrForged), errors.Is(err, ErrOverCommit):
		code = codes.PermissionDenied
	case errors.Is(err, ErrStale), errors.Is(err, ErrUnhealthy), errors.Is(err, ErrMIG), errors.Is(err, ErrUnsafeCacheDir),
		errors.Is(err, ErrAmbiguous):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrNoPendingPod):
		code = codes.NotFound
	}
	return status.Error(code, err.Error())
}
