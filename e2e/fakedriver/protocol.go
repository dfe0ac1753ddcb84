package fakedriver

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/utils/clock"
)

// Reasons of ERR responses. Each is one or more words; clients only test
// the ERR prefix, the words are for people reading a client's log.
const (
	reasonEmpty   = "empty request"
	reasonUnknown = "unknown request"
	reasonFields  = "wrong number of fields"
	reasonDevice  = "invalid device"
	reasonNumber  = "invalid number"
	reasonDelta   = "invalid delta, want 1 or -1"
	reasonPid     = "invalid pid"
	reasonTooLong = "request too long"
	reasonGone    = "connection closing"
	// reasonNoAccess refuses a request on a card whose device node the
	// caller's mount namespace lacks (nodes.go).
	reasonNoAccess = "no access to the card's device node"
	reasonEvents   = "event type not supported"
	reasonTimeout  = "invalid timeout"
)

// maxRequestLength is the longest request line the daemon reads; the
// longest valid one is under 60 bytes.
const maxRequestLength = 4096

// session is one connection's view of the driver: the process it speaks
// for and the channel closed when the connection is gone.
type session struct {
	st     *state
	waveNS uint64
	proc   *process
	gone   <-chan struct{}
	// reap counts the ends of connections whose processes have exited
	// (Driver.reap); nil in tests of the protocol alone.
	reap func()
	// access grants the process the card with the minor number or
	// refuses it (nodes.check); nil grants every card (Start). Its
	// verdicts are kept for the connection, as an open device file
	// stays open.
	access  func(minor int) error
	granted map[int]error
	// events holds every connection's event set; set is this one's, nil
	// until its first EVREG.
	events        *eventHub
	set           *eventSet
	clk           clock.Clock
	driverVersion string
}

// requestError is a request the driver refuses; its text is the ERR reason.
type requestError string

func (e requestError) Error() string { return string(e) }

// handle answers one request line (without its newline).
func (s *session) handle(line string) string {
	if line == "" {
		return "ERR " + reasonEmpty
	}
	f := strings.Split(line, " ")
	resp, err := s.dispatch(f[0], f[1:])
	if err != nil {
		return "ERR " + err.Error()
	}
	return resp
}

// dispatch runs the request verb with its arguments.
func (s *session) dispatch(verb string, args []string) (string, error) {
	switch verb {
	case "HELLO":
		return s.hello(args)
	case "DEV":
		return s.dev(args)
	case "SELF":
		return s.self(args)
	case "OPEN", "INFO", "TOPO", "SYS", "EVREG", "EVWAIT":
		return s.nvml(verb, args)
	case "HOSTALLOC", "HOSTFREE":
		return s.hostMem(verb, args)
	case "ALLOC", "MEM", "PROCS", "IMPORT":
		// What reads or takes memory sees exited processes gone.
		if s.reap != nil {
			s.reap()
		}
	}
	switch verb {
	case "ALLOC":
		return s.alloc(args)
	case "FREE":
		return s.free(args)
	case "CTX":
		return s.ctx(args)
	case "LAUNCH":
		return s.launch(args)
	case "SYNC":
		return s.sync(args)
	case "MEM":
		return s.mem(args)
	case "PROCS":
		return s.procs(args)
	case "PUTIL":
		return s.putil(args)
	case "DUTIL":
		return s.dutil(args)
	case "BUSY":
		return s.busy(args)
	case "EXPORT":
		return s.export(args)
	case "IMPORT":
		return s.imp(args)
	case "UNIMPORT":
		return s.unimport(args)
	case "UNEXPORT":
		return s.unexport(args)
	case "UNSHARE":
		return s.unshare(args)
	}
	return "", requestError(reasonUnknown)
}

// hello answers HELLO: the device count and the wave time.
func (s *session) hello(args []string) (string, error) {
	if len(args) != 0 {
		return "", requestError(reasonFields)
	}
	return fmt.Sprintf("OK %d %d", len(s.st.devs), s.waveNS), nil
}

// dev answers DEV <d>: the device's description. DEV is answered for every
// card, granted or not: what /proc/driver/nvidia/gpus shows any process
// (the container toolkit does not mask it here).
func (s *session) dev(args []string) (string, error) {
	d, err := s.device(args, 1)
	if err != nil {
		return "", err
	}
	dv := s.st.devs[d]
	c := dv.cfg
	return fmt.Sprintf("OK %s %d %d %d %s %s", c.UUID, c.TotalBytes, c.SMs, dv.facts.Minor(), dv.facts.BusID(), c.Name), nil
}

// self answers SELF: the caller's host pid.
func (s *session) self(args []string) (string, error) {
	if len(args) != 0 {
		return "", requestError(reasonFields)
	}
	return fmt.Sprintf("OK %d", s.proc.pid), nil
}

// alloc answers ALLOC <d> <bytes>.
func (s *session) alloc(args []string) (string, error) {
	d, n, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if !s.st.alloc(s.proc, d, n) {
		return "OOM", nil
	}
	return "OK", nil
}

// free answers FREE <d> <bytes>.
func (s *session) free(args []string) (string, error) {
	d, n, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if err := s.st.free(s.proc, d, n); err != nil {
		return "", requestError(err.Error())
	}
	return "OK", nil
}

// ctx answers CTX <d> <delta>.
func (s *session) ctx(args []string) (string, error) {
	d, err := s.card(args, 2)
	if err != nil {
		return "", err
	}
	var delta int
	switch args[1] {
	case "1":
		delta = 1
	case "-1":
		delta = -1
	default:
		return "", requestError(reasonDelta)
	}
	if err := s.st.context(s.proc, d, delta); err != nil {
		return "", requestError(err.Error())
	}
	return "OK", nil
}

// launch answers LAUNCH <d> <work_ns>, once the work is queued.
func (s *session) launch(args []string) (string, error) {
	d, n, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if err := s.st.launch(s.proc, d, n, s.gone); err != nil {
		return "", requestError(reasonGone)
	}
	return "OK", nil
}

// sync answers SYNC <d>, once the caller's queue on d is empty.
func (s *session) sync(args []string) (string, error) {
	d, err := s.card(args, 1)
	if err != nil {
		return "", err
	}
	if err := s.st.sync(s.proc, d, s.gone); err != nil {
		return "", requestError(reasonGone)
	}
	return "OK", nil
}

// mem answers MEM <d>: total and used bytes.
func (s *session) mem(args []string) (string, error) {
	d, err := s.card(args, 1)
	if err != nil {
		return "", err
	}
	total, used := s.st.memInfo(d)
	return fmt.Sprintf("OK %d %d", total, used), nil
}

// procs answers PROCS <d>: the processes with a context on d.
func (s *session) procs(args []string) (string, error) {
	d, err := s.card(args, 1)
	if err != nil {
		return "", err
	}
	ps := s.st.listed(d)
	var b strings.Builder
	fmt.Fprintf(&b, "OK %d", len(ps))
	for _, p := range ps {
		fmt.Fprintf(&b, " %d:%d:%d", p.Pid, p.Bytes, p.Contexts)
	}
	return b.String(), nil
}

// putil answers PUTIL <d> <last_seen_us>.
func (s *session) putil(args []string) (string, error) {
	d, since, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	us := s.st.procUtil(d, since)
	var b strings.Builder
	fmt.Fprintf(&b, "OK %d", len(us))
	for _, u := range us {
		fmt.Fprintf(&b, " %d:%d:%d", u.pid, u.tsUS, u.smPct)
	}
	return b.String(), nil
}

// dutil answers DUTIL <d>.
func (s *session) dutil(args []string) (string, error) {
	d, err := s.card(args, 1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("OK %d", s.st.devUtil(d)), nil
}

// busy answers BUSY <d> <hostpid>; 0 for a pid the driver never saw.
func (s *session) busy(args []string) (string, error) {
	d, pid, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if pid == 0 || pid > math.MaxInt32 {
		return "", requestError(reasonPid)
	}
	return fmt.Sprintf("OK %d", s.st.busy(d, int(pid))), nil
}

// device checks that there are want arguments and parses the first as a
// device index.
func (s *session) device(args []string, want int) (int, error) {
	if len(args) != want {
		return 0, requestError(reasonFields)
	}
	d, err := parseNumber(args[0])
	if err != nil || d >= uint64(len(s.st.devs)) {
		return 0, requestError(reasonDevice)
	}
	return int(d), nil
}

// card is device for a request on the card: it also checks that the
// caller may use it (session.access), once per connection and card.
func (s *session) card(args []string, want int) (int, error) {
	d, err := s.device(args, want)
	if err != nil {
		return 0, err
	}
	return d, s.grant(d)
}

// grant checks, once per connection, that the caller may use card d.
func (s *session) grant(d int) error {
	if s.access == nil {
		return nil
	}
	err, seen := s.granted[d]
	if !seen {
		err = s.access(s.st.devs[d].facts.Minor())
		if s.granted == nil {
			s.granted = make(map[int]error)
		}
		s.granted[d] = err
	}
	return err
}

// deviceAndNumber parses "<d> <number>" for a request on card d.
func (s *session) deviceAndNumber(args []string) (int, uint64, error) {
	d, err := s.card(args, 2)
	if err != nil {
		return 0, 0, err
	}
	n, err := parseNumber(args[1])
	if err != nil {
		return 0, 0, requestError(reasonNumber)
	}
	return d, n, nil
}

// parseNumber parses an unsigned decimal number: digits only, no sign.
func parseNumber(s string) (uint64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, errors.New("not a decimal number")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse number %q: %w", s, err)
	}
	return n, nil
}
