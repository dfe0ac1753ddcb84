package device

import (
	"sort"
	"strconv"
	"strings"
)

// Status codes, numerically equal to Volcano's scheduler api status codes so
// they convert without a table.
const (
	// Success means the pod fits.
	Success = 0
	// Error is an internal error or malformed input.
	Error = 1
	// Unschedulable means the pod does not fit now but could after other
	// pods leave (preemption may help).
	Unschedulable = 2
	// UnschedulableAndUnresolvable means evicting pods would not help.
	UnschedulableAndUnresolvable = 3
)

// Status is the result of FilterNode. A nil *Status means success.
type Status struct {
	// Code is one of Success, Error, Unschedulable, UnschedulableAndUnresolvable.
	Code int
	// Reasons are the distinct causes, each stable across nodes so that
	// Volcano's fit-error histogram groups them (for example
	// "insufficient GPU memory on card").
	Reasons []string
}

// IsSuccess reports whether the status is a success.
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// Message joins the reasons.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons, "; ")
}

// NewStatus builds a status with the given code and reasons.
func NewStatus(code int, reasons ...string) *Status {
	return &Status{Code: code, Reasons: reasons}
}

// CardReasons counts per-card rejection reasons while a backend walks a
// node's cards, and turns them into a Status.
type CardReasons struct {
	counts     map[string]int
	resolvable bool
}

// Add records that one card was rejected for reason. resolvable says whether
// evicting pods could make the card fit (memory or cores used by others) or
// not (unhealthy, wrong type, excluded by a selector, too small in total).
func (c *CardReasons) Add(reason string, resolvable bool) {
	if c.counts == nil {
		c.counts = make(map[string]int)
	}
	c.counts[reason]++
	c.resolvable = c.resolvable || resolvable
}

// Empty reports whether no card was rejected.
func (c *CardReasons) Empty() bool { return len(c.counts) == 0 }

// Status turns the counted reasons into a failure status. Each reason is
// reported once per node, so Volcano's histogram counts nodes per reason; the
// card counts go to Detail for logs. The status is resolvable when at least
// one card could fit after evictions.
func (c *CardReasons) Status() *Status {
	reasons := make([]string, 0, len(c.counts))
	for r := range c.counts {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	code := UnschedulableAndUnresolvable
	if c.resolvable {
		code = Unschedulable
	}
	return &Status{Code: code, Reasons: reasons}
}

// Detail renders "reason x N" pairs for logs, sorted by reason.
func (c *CardReasons) Detail() string {
	reasons := make([]string, 0, len(c.counts))
	for r := range c.counts {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	var b strings.Builder
	for i, r := range reasons {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r)
		b.WriteString(" x")
		b.WriteString(strconv.Itoa(c.counts[r]))
	}
	return b.String()
}
