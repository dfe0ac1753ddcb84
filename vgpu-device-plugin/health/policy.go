package health

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Environment variables of NVIDIA's k8s-device-plugin that select checks.
const (
	EnvDisableHealthChecks = "DP_DISABLE_HEALTHCHECKS"
	EnvEnableHealthChecks  = "DP_ENABLE_HEALTHCHECKS"
)

// ApplicationXids are the Xids a user's program causes (graphics engine
// exception, MMU fault, reset channel, preemptive cleanup, video processor
// exception, ...); they do not make the card unusable and are ignored by
// default.
func ApplicationXids() []uint64 {
	return []uint64{13, 31, 43, 45, 68, 109}
}

// Policy says which events make a card unhealthy.
type Policy struct {
	// Disabled turns health checking off.
	Disabled bool
	// XidsDisabled ignores every Xid event (ECC errors still count).
	XidsDisabled bool
	// IgnoredXids are the Xids that do not make a card unhealthy.
	IgnoredXids map[uint64]bool
	// EnabledXids are critical whatever XidsDisabled and IgnoredXids say.
	EnabledXids map[uint64]bool
}

// DefaultPolicy checks everything but the application Xids.
func DefaultPolicy() Policy {
	p := Policy{IgnoredXids: map[uint64]bool{}, EnabledXids: map[uint64]bool{}}
	for _, x := range ApplicationXids() {
		p.IgnoredXids[x] = true
	}
	return p
}

// ParsePolicy reads the values of DP_DISABLE_HEALTHCHECKS and
// DP_ENABLE_HEALTHCHECKS: comma-separated, case-insensitive tokens.
// Disable: "all" (no health checks), "xids" (ignore Xid events) or Xid
// numbers to ignore. Enable: "all" (no Xid is ignored by default) or Xid
// numbers that count as critical even if ignored by default or disabled.
func ParsePolicy(disable, enable string) (Policy, error) {
	p := DefaultPolicy()
	dis, err := tokens(EnvDisableHealthChecks, disable, "all", "xids")
	if err != nil {
		return p, err
	}
	en, err := tokens(EnvEnableHealthChecks, enable, "all")
	if err != nil {
		return p, err
	}
	for _, t := range dis {
		switch t {
		case "all":
			p.Disabled = true
		case "xids":
			p.XidsDisabled = true
		default:
			x, _ := strconv.ParseUint(t, 10, 64)
			p.IgnoredXids[x] = true
		}
	}
	for _, t := range en {
		if t == "all" {
			clear(p.IgnoredXids)
			continue
		}
		x, _ := strconv.ParseUint(t, 10, 64)
		p.EnabledXids[x] = true
	}
	return p, nil
}

// tokens splits a variable's value and checks each token is a keyword or a
// Xid number.
func tokens(env, value string, keywords ...string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(strings.ToLower(value), ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !slices.Contains(keywords, t) {
			if _, err := strconv.ParseUint(t, 10, 64); err != nil {
				return nil, fmt.Errorf("%s=%q: token %q: want %s or Xid numbers, comma-separated",
					env, value, t, strings.Join(keywords, ", "))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// critical reports whether an Xid makes a card unhealthy.
func (p Policy) critical(xid uint64) bool {
	return p.EnabledXids[xid] || (!p.XidsDisabled && !p.IgnoredXids[xid])
}
