package kubectlvshare

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitError: no cluster, RBAC forbids a read, an object is not found,
	// or the output could not be written.
	ExitError = 1
	// ExitUsage: unknown command or flag, missing or invalid argument.
	ExitUsage = 2
	// ExitNoFit: `fit` found no node the shape fits now.
	ExitNoFit = 3
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// apiError is a failed read, named by verb and object.
type apiError struct {
	verb, resource, namespace, name string
	err                             error
}

// object renders what was read: "pod ns/name", "pods in namespace ns",
// "nodes".
func (e *apiError) object() string {
	switch {
	case e.name != "" && e.namespace != "":
		return strings.TrimSuffix(e.resource, "s") + " " + e.namespace + "/" + e.name
	case e.name != "":
		return strings.TrimSuffix(e.resource, "s") + " " + e.name
	case e.namespace != "":
		return e.resource + " in namespace " + e.namespace
	default:
		return e.resource
	}
}

func (e *apiError) Error() string {
	switch {
	case apierrors.IsNotFound(e.err):
		return e.object() + " not found"
	case apierrors.IsForbidden(e.err):
		return fmt.Sprintf("forbidden: cannot %s %s: %s (kubectl vshare needs get and list on nodes and pods, list on "+
			"events, get on podgroups.scheduling.volcano.sh; see docs/kubectl-vshare.md#rbac)", e.verb, e.object(), apiMessage(e.err))
	case apierrors.IsUnauthorized(e.err):
		return fmt.Sprintf("unauthorized: cannot %s %s: the credentials of the kubeconfig were refused: %s", e.verb, e.object(), apiMessage(e.err))
	case unreachable(e.err):
		return fmt.Sprintf("no cluster: cannot %s %s: the API server cannot be reached: %v", e.verb, e.object(), e.err)
	default:
		return fmt.Sprintf("%s %s: %v", e.verb, e.object(), e.err)
	}
}

func (e *apiError) Unwrap() error { return e.err }

// apiMessage is the API server's message of a status error.
func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// unreachable reports whether err is a failure to reach the API server.
func unreachable(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de)
}

// exitCode maps an error to the exit code.
func exitCode(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}
