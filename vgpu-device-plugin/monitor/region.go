package monitor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The layout of libvgpu/include/vgpu_region.h. region_test.go checks every
// value against the header.
const (
	RegionMagic   = uint64(0x4745522d55504756) // "VGPU-REG" little-endian
	RegionVersion = 1
	MaxDevices    = 16
	MaxProcs      = 1024
	UUIDBytes     = 64
	BootIDBytes   = 40
	HeaderSize    = 4096
	SlotSize      = 512
	RegionSize    = HeaderSize + MaxProcs*SlotSize

	offMagic       = 0
	offVersion     = 8
	offHeaderSize  = 12
	offSlotSize    = 16
	offMaxProcs    = 20
	offMaxDevices  = 24
	offDeviceCount = 28
	offTotalSize   = 32
	offCreated     = 40
	offBootID      = 48
	offSlotHWM     = 88
	offLiveProcs   = 92
	offGeneration  = 96
	offPriority    = 104
	offLock        = 128
	offMemLimit    = 192
	offMemUsed     = 320
	offSMLimit     = 448
	offUtilSwitch  = 512
	offSMUtil      = 576
	offUUID        = 768
	offSMMode      = 1792
	offHostMiB     = 1856
	offPrioLaunch  = 1920 // u64[2][MaxDevices]: [priority][device]
	offPeerHigh    = 2176 // u64[MaxDevices], written by the Prioritizer
)

// How a device's SM limit is enforced (the header's sm_mode, VGPU_SM_MODE_*).
// Zero also in regions of libvgpu builds older than the field.
const (
	SMModeNone    = 0 // no SM limit, or no kernel launched yet
	SMModeProcess = 1 // NVML per-process utilisation of the container's host pids
	SMModeDevice  = 2 // device-wide utilisation: never above the share, may be below
	SMModeOff     = 3 // a limit is set but NVML reports no utilisation: not enforced
)

// Sentinel errors of ReadRegion.
var (
	// ErrNotRegion: the file is not a libvgpu shared region (wrong magic,
	// sizes, or too short). A file being created reads so until libvgpu
	// writes the magic last.
	ErrNotRegion = errors.New("not a libvgpu shared region")
	// ErrRegionVersion: the region has another layout version.
	ErrRegionVersion = errors.New("unsupported shared region version")
)

// Region is the header of one container's shared region.
type Region struct {
	Version     uint32
	DeviceCount int
	LiveProcs   uint32
	Priority    int32
	// Per device index (the container's device order), up to DeviceCount.
	UUID     []string
	MemLimit []uint64 // bytes, 0: no limit
	MemUsed  []uint64 // bytes
	SMLimit  []uint32 // percent, 0: no limit
	SMUtil   []uint32 // percent
	SMMode   []uint32 // SMMode* constants
	HostMiB  []uint32 // of MemUsed, MiB served from host memory (oversubscription)
	// HighLaunch is the CLOCK_MONOTONIC_COARSE ns of the container's latest
	// kernel launch at high priority (CUDA_TASK_PRIORITY=0), 0: none.
	HighLaunch []uint64
	// PeerHigh is what the Prioritizer last wrote: the newest HighLaunch
	// of the other containers on the card.
	PeerHigh []uint64
}

// ReadRegion reads a shared region's header.
func ReadRegion(path string) (*Region, error) {
	f, err := openRegion(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, HeaderSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: shorter than the %d-byte header: %w", path, HeaderSize, ErrNotRegion)
		}
		return nil, fmt.Errorf("read shared region %s: %w", path, err)
	}
	return parseRegion(path, buf)
}

func parseRegion(path string, buf []byte) (*Region, error) {
	le := binary.LittleEndian
	if m := le.Uint64(buf[offMagic:]); m != RegionMagic {
		return nil, fmt.Errorf("%s: magic %#x, want %#x: %w", path, m, RegionMagic, ErrNotRegion)
	}
	if v := le.Uint32(buf[offVersion:]); v != RegionVersion {
		return nil, fmt.Errorf("%s: version %d, this agent reads %d: %w", path, v, RegionVersion, ErrRegionVersion)
	}
	if hs, ss, ts := le.Uint32(buf[offHeaderSize:]), le.Uint32(buf[offSlotSize:]), le.Uint64(buf[offTotalSize:]); hs != HeaderSize || ss != SlotSize || ts != RegionSize {
		return nil, fmt.Errorf("%s: header %d, slot %d, total %d bytes; want %d, %d, %d: %w", path, hs, ss, ts, HeaderSize, SlotSize, RegionSize, ErrNotRegion)
	}
	n := int(le.Uint32(buf[offDeviceCount:]))
	if n > MaxDevices {
		return nil, fmt.Errorf("%s: device_count %d above %d: %w", path, n, MaxDevices, ErrNotRegion)
	}
	r := &Region{
		Version: RegionVersion, DeviceCount: n,
		LiveProcs: le.Uint32(buf[offLiveProcs:]), Priority: int32(le.Uint32(buf[offPriority:])),
		UUID: make([]string, n), MemLimit: make([]uint64, n), MemUsed: make([]uint64, n),
		SMLimit: make([]uint32, n), SMUtil: make([]uint32, n), SMMode: make([]uint32, n),
		HostMiB: make([]uint32, n), HighLaunch: make([]uint64, n), PeerHigh: make([]uint64, n),
	}
	for i := 0; i < n; i++ {
		r.MemLimit[i] = le.Uint64(buf[offMemLimit+8*i:])
		r.MemUsed[i] = le.Uint64(buf[offMemUsed+8*i:])
		r.SMLimit[i] = le.Uint32(buf[offSMLimit+4*i:])
		r.SMUtil[i] = le.Uint32(buf[offSMUtil+4*i:])
		r.SMMode[i] = le.Uint32(buf[offSMMode+4*i:])
		r.HostMiB[i] = le.Uint32(buf[offHostMiB+4*i:])
		r.HighLaunch[i] = le.Uint64(buf[offPrioLaunch+8*i:])
		r.PeerHigh[i] = le.Uint64(buf[offPeerHigh+8*i:])
		raw := buf[offUUID+UUIDBytes*i : offUUID+UUIDBytes*(i+1)]
		if end := bytes.IndexByte(raw, 0); end >= 0 {
			raw = raw[:end]
		}
		r.UUID[i] = string(raw)
	}
	return r, nil
}

// openRegion opens a region file, never through a symlink and only if it is
// a regular file: the agent reads and writes regions as root, and a
// container whose directory was writable (an older agent made it so) may
// have planted a symlink to a host file or a FIFO that would block the
// exporter. O_NONBLOCK only matters for such a FIFO.
func openRegion(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open shared region: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file: %w", path, ErrNotRegion)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
