package allocation

import (
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

// Refusals both protocols share.
var (
	// ErrForged: the pod's annotations do not describe an allocation this
	// node can have been given (codes.PermissionDenied).
	ErrForged = NewRefusal(codes.PermissionDenied, "allocation annotations refused")
	// ErrStale: the allocation is older than the allocation timeout
	// (codes.FailedPrecondition).
	ErrStale = NewRefusal(codes.FailedPrecondition, "stale allocation")
)

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
