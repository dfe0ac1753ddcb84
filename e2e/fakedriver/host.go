package fakedriver

import "fmt"

// Page-locked host memory mapped into a card's address space.
//
// CUDA Driver API reference, "Memory Management", cuMemHostAlloc:
// "Allocates bytesize bytes of host memory that is page-locked and
// accessible to the device"; with CU_MEMHOSTALLOC_DEVICEMAP it "maps the
// allocation into the CUDA address space", and cuMemHostGetDevicePointer
// "passes back the device pointer pdptr corresponding to the mapped, pinned
// host buffer". Kernels reach it over the bus; the card's memory is not
// used. So the driver pins it and maps it, but its card accounting never
// counts it: MEM's used, PROCS' bytes (NVML's usedGpuMemory), Stats'
// UsedBytes and the card and group peaks stay what the card holds. cuCtxDestroy
// "destroys and cleans up all resources associated with the context ...
// memory allocations by cuMemAlloc(), cuMemAllocHost() ..." and the kernel
// driver unpins a process's memory when it exits: the client sends
// HOSTFREE for the first, the end of the process's last connection does the
// second.
//
// The driver records it per process and per card, the card being the one
// whose context made the mapping, so that a test can bound what a container
// held on a card and in host memory mapped for it together (GroupPeak with
// host, Stats' GroupStats.PeakTotalBytes): the over-commit promise of a
// share is card plus host, never more.

// hostAlloc records bytes of pinned host memory p mapped for card d.
func (s *state) hostAlloc(p *process, d int, bytes uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.conns <= 0 {
		return false // gone while its request was on the way
	}
	if bytes == 0 {
		return true
	}
	dev := s.devs[d]
	pd := &p.devs[d]
	pd.touched = true
	pd.hostBytes += bytes
	pd.hostPeak = max(pd.hostPeak, pd.hostBytes)
	dev.hostUsed += bytes
	if p.group != "" {
		g := dev.groupLocked(p.group)
		g.hostBytes += bytes
		g.hostPeak = max(g.hostPeak, g.hostBytes)
		g.noteTotal()
	}
	return true
}

// hostFree gives back bytes of pinned host memory p mapped for card d.
func (s *state) hostFree(p *process, d int, bytes uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := &p.devs[d]
	if bytes > pd.hostBytes {
		return errFreeExceedsHeld
	}
	pd.hostBytes -= bytes
	s.devs[d].hostUsed -= bytes
	if p.group != "" {
		s.devs[d].groupLocked(p.group).hostBytes -= bytes
	}
	return nil
}

// endHostLocked unpins everything p held, as when a process exits.
func (s *state) endHostLocked(p *process) {
	for _, d := range s.devs {
		pd := &p.devs[d.idx]
		d.hostUsed -= pd.hostBytes
		if p.group != "" && pd.hostBytes > 0 {
			d.groupLocked(p.group).hostBytes -= pd.hostBytes
		}
		pd.hostBytes = 0
	}
}

// moveHostLocked moves p's pinned host memory from group from to group to
// ("" for none) on every card.
func (s *state) moveHostLocked(p *process, from, to string) {
	for _, d := range s.devs {
		b := p.devs[d.idx].hostBytes
		if from != "" {
			d.groupLocked(from).hostBytes -= b
		}
		if to != "" {
			g := d.groupLocked(to)
			g.hostBytes += b
			g.hostPeak = max(g.hostPeak, g.hostBytes)
			g.noteTotal()
		}
	}
}

// notePeakTotalLocked raises group's card-plus-host peak on d to what it
// holds now; called whenever its card memory grows.
func (d *device) notePeakTotalLocked(group string) {
	if g, ok := d.groups[group]; ok {
		g.noteTotal()
	}
}

// noteTotal raises the group's card-plus-host peak to what it holds now.
func (g *groupMem) noteTotal() { g.totalPeak = max(g.totalPeak, g.bytes+g.hostBytes) }

// resetHostPeaksLocked is ResetPeaks for pinned host memory.
func (s *state) resetHostPeaksLocked() {
	for _, d := range s.devs {
		for _, g := range d.groups {
			g.hostPeak = g.hostBytes
			g.totalPeak = g.bytes + g.hostBytes
		}
	}
	for _, p := range s.procs {
		for i := range p.devs {
			p.devs[i].hostPeak = p.devs[i].hostBytes
		}
	}
}

// hostMem answers HOSTALLOC <d> <bytes> (OK; OOM only for a process that is
// gone) and HOSTFREE <d> <bytes> (OK, or ERR for more than it holds).
func (s *session) hostMem(verb string, args []string) (string, error) {
	if s.reap != nil {
		s.reap()
	}
	d, n, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	if verb == "HOSTFREE" {
		if err := s.st.hostFree(s.proc, d, n); err != nil {
			return "", requestError(err.Error())
		}
		return "OK", nil
	}
	if !s.st.hostAlloc(s.proc, d, n) {
		return "OOM", nil
	}
	return "OK", nil
}

// HostPeak returns the most pinned host memory the processes of group had
// mapped for card d together since the start or the last ResetPeaks.
func (dr *Driver) HostPeak(d int, group string) uint64 {
	return dr.groupPeaks(d, group, func(g *groupMem) uint64 { return g.hostPeak })
}

// GroupPeakWithHost returns the most the processes of group held on card d
// and in pinned host memory mapped for it, together, at any instant since
// the start or the last ResetPeaks: what an over-committed share bounds.
func (dr *Driver) GroupPeakWithHost(d int, group string) uint64 {
	return dr.groupPeaks(d, group, func(g *groupMem) uint64 { return g.totalPeak })
}

// groupPeaks reads one figure of group's record on card d; 0 for an invalid
// card or an unknown group.
func (dr *Driver) groupPeaks(d int, group string, f func(*groupMem) uint64) uint64 {
	if !dr.validDevice(d) {
		return 0
	}
	dr.st.mu.Lock()
	defer dr.st.mu.Unlock()
	if g, ok := dr.st.devs[d].groups[group]; ok {
		return f(g)
	}
	return 0
}

// String describes a group's memory on one card for test failures.
func (g GroupStats) String() string {
	return fmt.Sprintf("card %d (peak %d), host %d (peak %d), card+host peak %d",
		g.Bytes, g.PeakBytes, g.HostBytes, g.PeakHostBytes, g.PeakTotalBytes)
}
