package monitor

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// headerPath is libvgpu's layout header, the single definition of the region.
const headerPath = "../../libvgpu/include/vgpu_region.h"

// layoutProgram prints, from the C header, every value the Go mirror uses.
const layoutProgram = `#include <stdio.h>
#include "vgpu_region.h"
#define OFF(f) printf("off_%s=%zu\n", #f, offsetof(struct vgpu_region_header, f))
int main(void) {
	printf("magic_value=%llu\n", (unsigned long long)VGPU_REGION_MAGIC);
	printf("version_value=%u\n", VGPU_REGION_VERSION);
	printf("max_devices_value=%d\n", VGPU_MAX_DEVICES);
	printf("max_procs_value=%d\n", VGPU_MAX_PROCS);
	printf("uuid_bytes=%d\n", VGPU_UUID_BYTES);
	printf("boot_id_bytes=%d\n", VGPU_BOOT_ID_BYTES);
	printf("sizeof_header=%zu\n", sizeof(struct vgpu_region_header));
	printf("sizeof_slot=%zu\n", sizeof(struct vgpu_proc_slot));
	printf("sizeof_region=%zu\n", sizeof(struct vgpu_region));
	OFF(magic); OFF(version); OFF(header_size); OFF(slot_size); OFF(max_procs);
	OFF(max_devices); OFF(device_count); OFF(total_size); OFF(created_unix_ns);
	OFF(boot_id); OFF(slot_hwm); OFF(live_procs); OFF(generation); OFF(priority);
	OFF(lock); OFF(mem_limit); OFF(mem_used); OFF(sm_limit); OFF(util_switch);
	OFF(sm_util); OFF(uuid); OFF(sm_mode); OFF(host_mib); OFF(prio_launch_ns); OFF(peer_high_ns);
	printf("prio_levels=%d\n", VGPU_PRIO_LEVELS);
	printf("sm_mode_values=%u%u%u%u\n", VGPU_SM_MODE_NONE, VGPU_SM_MODE_PROCESS, VGPU_SM_MODE_DEVICE,
	       VGPU_SM_MODE_OFF);
	return 0;
}
`

func TestRegionLayoutMatchesHeader(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: cannot check the layout against", headerPath)
	}
	if _, err := os.Stat(headerPath); err != nil {
		t.Fatalf("libvgpu's header: %v", err)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "layout.c"), filepath.Join(dir, "layout")
	if err := os.WriteFile(src, []byte(layoutProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-std=c11", "-I", filepath.Dir(headerPath), "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("compile against %s: %v\n%s", headerPath, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, line := range strings.Fields(string(out)) {
		k, v, _ := strings.Cut(line, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[k] = n
	}
	want := map[string]uint64{
		"magic_value": RegionMagic, "version_value": RegionVersion, "max_devices_value": MaxDevices,
		"max_procs_value": MaxProcs, "uuid_bytes": UUIDBytes, "boot_id_bytes": BootIDBytes,
		"sizeof_header": HeaderSize, "sizeof_slot": SlotSize, "sizeof_region": RegionSize,
		"off_magic": offMagic, "off_version": offVersion, "off_header_size": offHeaderSize,
		"off_slot_size": offSlotSize, "off_max_procs": offMaxProcs, "off_max_devices": offMaxDevices,
		"off_device_count": offDeviceCount, "off_total_size": offTotalSize, "off_created_unix_ns": offCreated,
		"off_boot_id": offBootID, "off_slot_hwm": offSlotHWM, "off_live_procs": offLiveProcs,
		"off_generation": offGeneration, "off_priority": offPriority, "off_lock": offLock,
		"off_mem_limit": offMemLimit, "off_mem_used": offMemUsed, "off_sm_limit": offSMLimit,
		"off_util_switch": offUtilSwitch, "off_sm_util": offSMUtil, "off_uuid": offUUID,
		"off_sm_mode": offSMMode, "off_host_mib": offHostMiB,
		"off_prio_launch_ns": offPrioLaunch, "off_peer_high_ns": offPeerHigh, "prio_levels": 2,
		"sm_mode_values": SMModeNone*1000 + SMModeProcess*100 + SMModeDevice*10 + SMModeOff,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Go mirror vs %s (-go +C):\n%s", headerPath, diff)
	}
}

// regionFile writes a region as libvgpu would.
type regionFile struct {
	version  uint32
	uuids    []string
	memLimit []uint64
	memUsed  []uint64
	smLimit  []uint32
	smUtil   []uint32
	smMode   []uint32
	hostMiB  []uint32
	highPrio bool     // header priority 0 (high); else 1 (low, libvgpu's default)
	high     []uint64 // prio_launch_ns[0]
	peer     []uint64 // peer_high_ns
}

// onCards is a region on uuids (one device each) with every per-device
// figure zero, of high priority when highPrio is set.
func onCards(highPrio bool, uuids ...string) regionFile {
	n := len(uuids)
	return regionFile{uuids: uuids, memLimit: make([]uint64, n), memUsed: make([]uint64, n),
		smLimit: make([]uint32, n), smUtil: make([]uint32, n), highPrio: highPrio}
}

func (r regionFile) write(t testing.TB, path string) {
	t.Helper()
	buf := make([]byte, RegionSize)
	le := binary.LittleEndian
	le.PutUint64(buf[offMagic:], RegionMagic)
	v := r.version
	if v == 0 {
		v = RegionVersion
	}
	le.PutUint32(buf[offVersion:], v)
	le.PutUint32(buf[offHeaderSize:], HeaderSize)
	le.PutUint32(buf[offSlotSize:], SlotSize)
	le.PutUint32(buf[offMaxProcs:], MaxProcs)
	le.PutUint32(buf[offMaxDevices:], MaxDevices)
	le.PutUint32(buf[offDeviceCount:], uint32(len(r.uuids)))
	le.PutUint64(buf[offTotalSize:], RegionSize)
	prio := uint32(PriorityLow)
	if r.highPrio {
		prio = PriorityHigh
	}
	le.PutUint32(buf[offPriority:], prio)
	for i, u := range r.uuids {
		copy(buf[offUUID+UUIDBytes*i:], u)
		le.PutUint64(buf[offMemLimit+8*i:], r.memLimit[i])
		le.PutUint64(buf[offMemUsed+8*i:], r.memUsed[i])
		le.PutUint32(buf[offSMLimit+4*i:], r.smLimit[i])
		le.PutUint32(buf[offSMUtil+4*i:], r.smUtil[i])
		if i < len(r.smMode) {
			le.PutUint32(buf[offSMMode+4*i:], r.smMode[i])
		}
		if i < len(r.hostMiB) {
			le.PutUint32(buf[offHostMiB+4*i:], r.hostMiB[i])
		}
		if i < len(r.high) {
			le.PutUint64(buf[offPrioLaunch+8*i:], r.high[i])
		}
		if i < len(r.peer) {
			le.PutUint64(buf[offPeerHigh+8*i:], r.peer[i])
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadRegion(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.cache")
	regionFile{uuids: []string{"GPU-a", "GPU-b"}, memLimit: []uint64{1 << 30, 2 << 30}, memUsed: []uint64{5, 6},
		smLimit: []uint32{30, 30}, smUtil: []uint32{12, 0}, smMode: []uint32{SMModeProcess, SMModeOff},
		hostMiB: []uint32{0, 300}, high: []uint64{0, 77}, peer: []uint64{88, 0}}.write(t, good)
	r, err := ReadRegion(good)
	if err != nil {
		t.Fatal(err)
	}
	want := &Region{Version: 1, DeviceCount: 2, Priority: PriorityLow, UUID: []string{"GPU-a", "GPU-b"}, MemLimit: []uint64{1 << 30, 2 << 30},
		MemUsed: []uint64{5, 6}, SMLimit: []uint32{30, 30}, SMUtil: []uint32{12, 0}, SMMode: []uint32{1, 3},
		HostMiB: []uint32{0, 300}, HighLaunch: []uint64{0, 77}, PeerHigh: []uint64{88, 0}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("region (-want +got):\n%s", diff)
	}
	v2 := filepath.Join(dir, "v2.cache")
	regionFile{version: 2}.write(t, v2)
	if _, err := ReadRegion(v2); !errors.Is(err, ErrRegionVersion) {
		t.Errorf("version 2: err = %v, want ErrRegionVersion", err)
	}
	short := filepath.Join(dir, "short.cache")
	os.WriteFile(short, []byte("VGPU"), 0o644)
	if _, err := ReadRegion(short); !errors.Is(err, ErrNotRegion) {
		t.Errorf("short file: err = %v, want ErrNotRegion", err)
	}
}
