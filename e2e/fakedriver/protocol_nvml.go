package fakedriver

import (
	"fmt"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// maxWaitMS bounds an EVWAIT's timeout (an unsigned int of milliseconds in
// nvmlEventSetWait_v2).
const maxWaitMS = 1<<32 - 1

// nvml answers the requests NVML's device queries and event sets make
// (PROTOCOL.md, "NVML facts and events").
func (s *session) nvml(verb string, args []string) (string, error) {
	switch verb {
	case "OPEN":
		if _, err := s.card(args, 1); err != nil {
			return "", err
		}
		return "OK", nil
	case "INFO":
		d, err := s.card(args, 1)
		if err != nil {
			return "", err
		}
		return "OK " + s.st.devs[d].facts.Info(), nil
	case "TOPO":
		return s.topo(args)
	case "SYS":
		if len(args) != 0 {
			return "", requestError(reasonFields)
		}
		return "OK " + s.driverVersion, nil
	case "EVREG":
		return s.evreg(args)
	case "EVWAIT":
		return s.evwait(args)
	}
	return "", requestError(reasonUnknown)
}

// topo answers TOPO <d> <e>: the PCIe common ancestor of two cards, both
// of which the caller must be granted.
func (s *session) topo(args []string) (string, error) {
	if len(args) != 2 {
		return "", requestError(reasonFields)
	}
	d, err := s.card(args[:1], 1)
	if err != nil {
		return "", err
	}
	e, err := s.card(args[1:], 1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("OK %d", cards.CommonAncestor(&s.st.devs[d].facts, &s.st.devs[e].facts)), nil
}

// evreg answers EVREG <d> <types>: this connection's event set records
// those event types on card d from now on. Types the card does not
// support are refused whole, as nvmlDeviceRegisterEvents registers none
// of the requested types when some are not supported.
func (s *session) evreg(args []string) (string, error) {
	d, types, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if types&^cards.EventXidCritical != 0 {
		return "", requestError(reasonEvents)
	}
	s.set = s.events.register(s.set, d, types)
	return "OK", nil
}

// evwait answers EVWAIT <timeout_ms>: "OK 1 <d> <type> <data>" for the
// oldest event this connection's set recorded, waiting up to the timeout
// for one, or "OK 0" when none came.
func (s *session) evwait(args []string) (string, error) {
	if len(args) != 1 {
		return "", requestError(reasonFields)
	}
	ms, err := parseNumber(args[0])
	if err != nil || ms > maxWaitMS {
		return "", requestError(reasonTimeout)
	}
	e, ok := s.events.wait(s.set, time.Duration(ms)*time.Millisecond, s.clk, s.gone)
	if !ok {
		return "OK 0", nil
	}
	return fmt.Sprintf("OK 1 %d %d %d", e.dev, e.typ, e.data), nil
}
