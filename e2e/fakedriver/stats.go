package fakedriver

import (
	"sort"
	"time"
)

// Stats is a snapshot of the driver's ground truth: what the devices
// really held and ran, whatever libvgpu believes.
type Stats struct {
	// Devices are in Config.Devices order.
	Devices []DeviceStats
}

// DeviceStats is one device's ground truth.
type DeviceStats struct {
	UUID       string
	TotalBytes uint64
	// UsedBytes is the memory all processes hold now.
	UsedBytes uint64
	// PeakUsedBytes is the most UsedBytes has been since the start or
	// the last ResetPeaks.
	PeakUsedBytes uint64
	// HostBytes is the pinned host memory mapped for the card now
	// (cuMemHostAlloc, host.go): host memory, not in UsedBytes.
	HostBytes uint64
	// Busy is the time during which any work ran on the device.
	Busy time.Duration
	// Processes are the pids that ever allocated, made a context or
	// launched on the device, alive or not, in pid order.
	Processes []ProcessStats
	// Groups are the memory of the groups (SetGroup, Config.GroupOf) on
	// the device, by group name.
	Groups map[string]GroupStats
}

// ProcessStats is one process's ground truth on one device.
type ProcessStats struct {
	// Pid is the host pid (SO_PEERCRED of its connection).
	Pid int
	// Alive says whether the process still has a connection open.
	Alive bool
	// Group is the group the process is counted in; "" for none.
	Group string
	// Bytes is the memory it holds now; PeakBytes the most it has held
	// since the start or the last ResetPeaks.
	Bytes, PeakBytes uint64
	// HostBytes is the pinned host memory it has mapped for the card now,
	// PeakHostBytes the most (host.go); neither is in Bytes.
	HostBytes, PeakHostBytes uint64
	// Contexts is its context count; NVML lists it while above 0.
	Contexts int
	// Queued is its work not yet run.
	Queued time.Duration
	// Service is the whole-device time its work has received.
	Service time.Duration
}

// GroupStats is the memory a group of processes holds on one device.
type GroupStats struct {
	// Bytes is the sum over the group's processes now; PeakBytes the most
	// that sum has been since the start or the last ResetPeaks.
	Bytes, PeakBytes uint64
	// HostBytes and PeakHostBytes are the same for the pinned host memory
	// the group mapped for the card (host.go); PeakTotalBytes is the most
	// Bytes+HostBytes has been.
	HostBytes, PeakHostBytes, PeakTotalBytes uint64
}

// Stats returns a snapshot of every device.
func (dr *Driver) Stats() Stats {
	dr.reap()
	s := dr.st
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := s.sortedPidsLocked()
	out := Stats{Devices: make([]DeviceStats, len(s.devs))}
	for i, d := range s.devs {
		ds := DeviceStats{
			UUID:          d.cfg.UUID,
			TotalBytes:    d.cfg.TotalBytes,
			UsedBytes:     d.used,
			PeakUsedBytes: d.peak,
			HostBytes:     d.hostUsed,
			Busy:          time.Duration(d.busyNS),
			Groups:        make(map[string]GroupStats, len(d.groups)),
		}
		for _, pid := range pids {
			if p := s.procs[pid]; p.devs[i].touched {
				ds.Processes = append(ds.Processes, processStats(p, i))
			}
		}
		for name, g := range d.groups {
			ds.Groups[name] = GroupStats{Bytes: g.bytes, PeakBytes: g.peak,
				HostBytes: g.hostBytes, PeakHostBytes: g.hostPeak, PeakTotalBytes: g.totalPeak}
		}
		out.Devices[i] = ds
	}
	return out
}

// processStats describes p on device d.
func processStats(p *process, d int) ProcessStats {
	pd := &p.devs[d]
	return ProcessStats{
		Pid:           p.pid,
		Alive:         p.conns > 0,
		Group:         p.group,
		Bytes:         pd.bytes,
		PeakBytes:     pd.peak,
		HostBytes:     pd.hostBytes,
		PeakHostBytes: pd.hostPeak,
		Contexts:      pd.ctxs,
		Queued:        time.Duration(pd.queuedNS),
		Service:       time.Duration(pd.serviceNS),
	}
}

// listed returns the processes with a context on device d, in pid order:
// what PROCS reports.
func (s *state) listed(d int) []ProcessStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ProcessStats
	for _, p := range s.procs {
		if p.devs[d].ctxs > 0 {
			out = append(out, processStats(p, d))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// validDevice reports whether d is a device index.
func (dr *Driver) validDevice(d int) bool {
	return d >= 0 && d < len(dr.st.devs)
}

// Processes returns the processes NVML would list on device d (those with
// a context), in pid order; nil for an invalid index.
func (dr *Driver) Processes(d int) []ProcessStats {
	if !dr.validDevice(d) {
		return nil
	}
	dr.reap()
	return dr.st.listed(d)
}

// Peak returns the most memory device d has had in use since the start or
// the last ResetPeaks; 0 for an invalid index.
func (dr *Driver) Peak(d int) uint64 {
	if !dr.validDevice(d) {
		return 0
	}
	dr.st.mu.Lock()
	defer dr.st.mu.Unlock()
	return dr.st.devs[d].peak
}

// ProcessPeak returns the most memory pid has held on device d since the
// start or the last ResetPeaks.
func (dr *Driver) ProcessPeak(d, pid int) uint64 {
	if !dr.validDevice(d) {
		return 0
	}
	dr.st.mu.Lock()
	defer dr.st.mu.Unlock()
	if p, ok := dr.st.procs[pid]; ok {
		return p.devs[d].peak
	}
	return 0
}

// ProcessBusy returns the whole-device time pid's work has received on
// device d (what BUSY answers).
func (dr *Driver) ProcessBusy(d, pid int) time.Duration {
	if !dr.validDevice(d) {
		return 0
	}
	return time.Duration(dr.st.busy(d, pid))
}

// SetGroup counts pid's memory in group ("" for none) from now on,
// including what it holds now, and takes it out of its former group. A
// container is a group of host pids: GroupPeak then bounds what the
// container held together. Memory a pid held and freed before SetGroup is
// not in the group's peak; Config.GroupOf has no such gap.
func (dr *Driver) SetGroup(pid int, group string) {
	dr.st.setGroup(pid, group)
}

// GroupPeak returns the most memory the processes of group held together
// on device d since the start or the last ResetPeaks.
func (dr *Driver) GroupPeak(d int, group string) uint64 {
	if !dr.validDevice(d) {
		return 0
	}
	dr.st.mu.Lock()
	defer dr.st.mu.Unlock()
	if g, ok := dr.st.devs[d].groups[group]; ok {
		return g.peak
	}
	return 0
}

// ResetPeaks sets every device, process and group peak to its current
// value, so a test can measure one phase on its own.
func (dr *Driver) ResetPeaks() {
	s := dr.st
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devs {
		d.peak = d.used
		for _, g := range d.groups {
			g.peak = g.bytes
		}
	}
	for _, p := range s.procs {
		for i := range p.devs {
			p.devs[i].peak = p.devs[i].bytes
		}
	}
	s.resetHostPeaksLocked()
}
