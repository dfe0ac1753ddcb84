package fakedriver

import (
	"errors"
	"fmt"
)

// Memory shared between processes (PROTOCOL.md, "Shared memory"): what the
// kernel driver keeps for CUDA IPC handles (cuIpcGetMemHandle,
// cuIpcOpenMemHandle, cuIpcCloseMemHandle) and VMM shareable handles
// (cuMemExportToShareableHandle, cuMemImportFromShareableHandle) in the
// CUDA Driver API reference. An exported allocation stays the exporter's
// memory; importers map it without taking any more. The physical memory
// lives while anyone holds it: when the exporter frees it, or exits, with
// importers left, it stays on the device, charged to no process, until the
// last importer lets go (closes, releases and unmaps, or exits).
//
// A stream-ordered allocation of a pool shared between processes
// (cuMemPoolExportPointer, cuMemPoolImportPointer) is exported the same way,
// but its exporter's free does not free it: it goes back into the
// exporter's pool, whose reserve stays the exporter's memory until the pool
// releases it. The reference requires importers to free an imported
// pointer before the exporter frees it (cuMemPoolImportPointer), so that
// free ends the sharing (UNSHARE), not the memory.

var (
	errNoExport   = errors.New("no such export")
	errNotImport  = errors.New("not imported by the caller")
	errNotExports = errors.New("not exported by the caller")
)

// export is one exported allocation.
type export struct {
	id    uint64
	dev   int
	bytes uint64
	owner *process    // nil once the exporter freed it, unshared it or ended
	refs  map[int]int // importers' references, by host pid
	// kept: unshared while imported; its bytes stayed the exporter's (its
	// pool's), so the last importer's drop frees nothing on the device.
	kept bool
}

// exportLocked marks bytes the caller holds on d as one exported
// allocation and returns its id.
func (s *state) exportLocked(p *process, d int, bytes uint64) (uint64, error) {
	if bytes == 0 || bytes > p.devs[d].bytes-s.exportedLocked(p, d) {
		return 0, errFreeExceedsHeld
	}
	if s.exports == nil {
		s.exports = make(map[uint64]*export)
	}
	s.nextExport++
	s.exports[s.nextExport] = &export{id: s.nextExport, dev: d, bytes: bytes, owner: p, refs: make(map[int]int)}
	return s.nextExport, nil
}

// exportedLocked is what p holds on d in exports it still owns.
func (s *state) exportedLocked(p *process, d int) uint64 {
	var n uint64
	for _, e := range s.exports {
		if e.owner == p && e.dev == d {
			n += e.bytes
		}
	}
	return n
}

// export answers EXPORT <d> <bytes>.
func (s *session) export(args []string) (string, error) {
	d, n, err := s.deviceAndNumber(args)
	if err != nil {
		return "", err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	id, err := s.st.exportLocked(s.proc, d, n)
	if err != nil {
		return "", requestError(err.Error())
	}
	return fmt.Sprintf("OK %d", id), nil
}

// imp answers IMPORT <id>: one more reference of the caller to the export.
func (s *session) imp(args []string) (string, error) {
	id, err := s.exportID(args)
	if err != nil {
		return "", err
	}
	s.st.mu.Lock()
	e, ok := s.st.exports[id]
	s.st.mu.Unlock()
	if !ok {
		return "", requestError(errNoExport.Error())
	}
	// Opening memory of a card needs that card, as the driver's node does.
	if err := s.grant(e.dev); err != nil {
		return "", err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if _, ok := s.st.exports[id]; !ok {
		return "", requestError(errNoExport.Error())
	}
	e.refs[s.proc.pid]++
	return fmt.Sprintf("OK %d %d", e.dev, e.bytes), nil
}

// unimport answers UNIMPORT <id>: the caller drops one reference.
func (s *session) unimport(args []string) (string, error) {
	id, err := s.exportID(args)
	if err != nil {
		return "", err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	e, ok := s.st.exports[id]
	if !ok || e.refs[s.proc.pid] == 0 {
		return "", requestError(errNotImport.Error())
	}
	e.refs[s.proc.pid]--
	if e.refs[s.proc.pid] == 0 {
		delete(e.refs, s.proc.pid)
	}
	s.st.settleExportLocked(e)
	return "OK", nil
}

// unexport answers UNEXPORT <id>: the exporter frees the allocation.
func (s *session) unexport(args []string) (string, error) {
	return s.ownExport(args, s.st.disownLocked)
}

// ownExport runs f, under the state's lock, on the export args name if the
// caller exported it.
func (s *session) ownExport(args []string, f func(*export)) (string, error) {
	id, err := s.exportID(args)
	if err != nil {
		return "", err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	e, ok := s.st.exports[id]
	if !ok || e.owner != s.proc {
		return "", requestError(errNotExports.Error())
	}
	f(e)
	return "OK", nil
}

// unshare answers UNSHARE <id>: the exporter stops sharing an allocation
// it keeps (a pool allocation freed back into its pool). Its bytes stay the
// caller's, no longer exported (FREE may take them); importers that have not
// let go, against the reference's order, keep their references to nothing
// more on the device.
func (s *session) unshare(args []string) (string, error) {
	return s.ownExport(args, func(e *export) {
		e.owner = nil
		if len(e.refs) == 0 {
			delete(s.st.exports, e.id)
		} else {
			e.kept = true
		}
	})
}

// disownLocked takes the export's bytes off its owner: freed if no
// importer holds them, else kept on the device for the importers.
func (s *state) disownLocked(e *export) {
	p, dev := e.owner, s.devs[e.dev]
	pd := &p.devs[e.dev]
	pd.bytes -= e.bytes
	if p.group != "" {
		dev.groupLocked(p.group).bytes -= e.bytes
	}
	e.owner = nil
	if len(e.refs) == 0 {
		dev.used -= e.bytes
		delete(s.exports, e.id)
	}
}

// settleExportLocked frees an export its owner gave up once no importer holds it.
func (s *state) settleExportLocked(e *export) {
	if e.owner == nil && len(e.refs) == 0 {
		if !e.kept {
			s.devs[e.dev].used -= e.bytes
		}
		delete(s.exports, e.id)
	}
}

// endSharedLocked is the end of process p for shared memory: its
// references drop, and what it exported with importers left stays on the
// device, no longer its own. Called before p's own memory is freed.
func (s *state) endSharedLocked(p *process) {
	for _, e := range s.exports {
		if _, ok := e.refs[p.pid]; ok {
			delete(e.refs, p.pid)
			s.settleExportLocked(e)
		}
	}
	for _, e := range s.exports {
		if e.owner != p {
			continue
		}
		if len(e.refs) == 0 {
			delete(s.exports, e.id) // freed with the rest of p's memory
			continue
		}
		// Kept for the importers: off p's books, still on the device.
		dev := s.devs[e.dev]
		p.devs[e.dev].bytes -= e.bytes
		if p.group != "" {
			dev.groupLocked(p.group).bytes -= e.bytes
		}
		e.owner = nil
	}
}

// exportID parses the one argument of IMPORT, UNIMPORT and UNEXPORT.
func (s *session) exportID(args []string) (uint64, error) {
	if len(args) != 1 {
		return 0, requestError(reasonFields)
	}
	id, err := parseNumber(args[0])
	if err != nil {
		return 0, requestError(reasonNumber)
	}
	return id, nil
}
