package allocation

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusal is a sentinel error of Allocate: a class of refusal, and the gRPC
// code the kubelet gets for it. Test for one with errors.Is.
type Refusal struct {
	msg  string
	code codes.Code
}

// NewRefusal returns a sentinel error of the class code.
func NewRefusal(code codes.Code, msg string) *Refusal { return &Refusal{msg: msg, code: code} }

// Error implements error.
func (r *Refusal) Error() string { return r.msg }

// Code returns the gRPC code of the class.
func (r *Refusal) Code() codes.Code { return r.code }

// Refusals both protocols share (ErrForged, ErrStale), and those a Choice
// tells apart (ErrNotBound, ErrNotAllocating).
var (
	// ErrForged: the pod's annotations do not describe an allocation this
	// node can have been given (codes.PermissionDenied).
	ErrForged = NewRefusal(codes.PermissionDenied, "allocation annotations refused")
	// ErrStale: the allocation is older than the allocation timeout
	// (codes.FailedPrecondition).
	ErrStale = NewRefusal(codes.FailedPrecondition, "stale allocation")
	// ErrNotBound: the pod carrying the allocation is not bound to this
	// node (codes.PermissionDenied). A Choice does not mark such a pod
	// failed: it is not this agent's.
	ErrNotBound = NewRefusal(codes.PermissionDenied, "pod not bound to this node")
	// ErrNotAllocating: the pod's bind-phase is not allocating
	// (codes.FailedPrecondition); a Choice counts it as no longer waiting.
	ErrNotAllocating = NewRefusal(codes.FailedPrecondition, "bind-phase is not allocating")
)

// ErrNotForRequest marks a pod whose claim is not refused but is not for
// this request (another size, nothing left to serve, being deleted): a
// Choice passes it over. It is no Refusal and has no gRPC code.
var ErrNotForRequest = errors.New("not for this request")

// precedence orders the classes: an error carrying refusals of several
// classes (a request no pod matched, joined with why a pod was refused)
// gets the code of the first.
var precedence = []codes.Code{codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument, codes.NotFound}

// Status wraps err in a gRPC status whose code is the class of the
// refusals err carries (see precedence); codes.Internal when it carries
// none.
func Status(err error) error {
	found := map[codes.Code]bool{}
	collect(err, found)
	code := codes.Internal
	for _, c := range precedence {
		if found[c] {
			code = c
			break
		}
	}
	return status.Error(code, err.Error())
}

// collect records the codes of the refusals in err's tree.
func collect(err error, found map[codes.Code]bool) {
	if r, ok := err.(*Refusal); ok {
		found[r.code] = true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			collect(next, found)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			collect(next, found)
		}
	}
}
