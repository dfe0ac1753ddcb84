package fakedriver

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	good := Device{UUID: "GPU-1", TotalBytes: 1, SMs: 1, Name: "Fake GPU"}
	other := Device{UUID: "GPU-2", TotalBytes: 1, SMs: 1, Name: "Fake GPU"}
	with := func(f func(*Device)) []Device { d := good; f(&d); return []Device{d} }
	minor := func(m int) *int { return &m }
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "valid", cfg: Config{Devices: []Device{good}, WaveNS: 1}},
		{name: "no devices is a node without GPUs", cfg: Config{WaveNS: 1}},
		{name: "every fact set", cfg: Config{WaveNS: 1, DriverVersion: "535.104.05", Devices: with(func(d *Device) {
			d.Minor, d.PCIBusID, d.ComputeCapability, d.NUMANode, d.CPUs = minor(3), "0000:3b:00.0", "9.0", -1, []int{0, 1}
			d.NVLinks = []NVLink{{SwitchBusID: "00000000:c1:00.0"}}
		})}},
		{name: "zero wave", cfg: Config{Devices: []Device{good}}, wantErr: "WaveNS is 0"},
		{name: "driver version with a space", cfg: Config{WaveNS: 1, DriverVersion: "550 1"}, wantErr: `DriverVersion "550 1"`},
		{name: "empty UUID", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.UUID = "" })}, wantErr: "Devices[0]: UUID"},
		{name: "name with a newline", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.Name = "Tesla\nT4" })}, wantErr: `name "Tesla\nT4"`},
		{name: "name with a trailing space", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.Name = "T4 " })}, wantErr: `name "T4 "`},
		{name: "no memory", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.TotalBytes = 0 })}, wantErr: "TotalBytes is 0"},
		{name: "no SMs", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.SMs = -1 })}, wantErr: "SMs is -1"},
		{name: "repeated UUID", cfg: Config{WaveNS: 1, Devices: []Device{good, good}}, wantErr: "repeats Devices[0]"},
		{name: "minor 255 is nvidiactl's", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.Minor = minor(255) })}, wantErr: "minor number 255, want 0..254"},
		{name: "repeated minor", cfg: Config{WaveNS: 1, Devices: []Device{good, func() Device { d := other; d.Minor = minor(0); return d }()}},
			wantErr: "Devices[1] has minor number 0, as Devices[0]"},
		{name: "bus ID without function", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.PCIBusID = "0000:3b:00" })}, wantErr: `bus ID "0000:3b:00"`},
		{name: "device number above 31", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.PCIBusID = "0:3b:20.0" })}, wantErr: `bus ID "0:3b:20.0"`},
		{name: "repeated bus ID", cfg: Config{WaveNS: 1, Devices: []Device{good, func() Device { d := other; d.PCIBusID = "0:1:0.0"; return d }()}},
			wantErr: "Devices[1] has PCI bus ID 00000000:01:00.0, as Devices[0]"},
		{name: "compute capability without minor", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.ComputeCapability = "8" })}, wantErr: `ComputeCapability: "8"`},
		{name: "NUMA node -2", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.NUMANode = -2 })}, wantErr: "NUMANode is -2"},
		{name: "negative CPU", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.CPUs = []int{0, -1} })}, wantErr: "CPUs[1] is -1"},
		{name: "NVLink to nothing", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.NVLinks = []NVLink{{}} })}, wantErr: "NVLinks[0]: want exactly one"},
		{name: "NVLink to itself", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.NVLinks = []NVLink{{PeerUUID: "GPU-1"}} })}, wantErr: "is the card itself"},
		{name: "NVLink to an unknown GPU", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.NVLinks = []NVLink{{PeerUUID: "GPU-9"}} })},
			wantErr: `NVLinks[0].PeerUUID "GPU-9": no such device`},
		{name: "NVLink listed on one end", cfg: Config{WaveNS: 1, Devices: []Device{
			func() Device { d := good; d.NVLinks = []NVLink{{PeerUUID: "GPU-2"}, {PeerUUID: "GPU-2"}}; return d }(),
			func() Device { d := other; d.NVLinks = []NVLink{{PeerUUID: "GPU-1"}}; return d }()}},
			wantErr: "lists 2 NVLinks to GPU-2, which lists 1 back"},
		{name: "37 NVLinks", cfg: Config{WaveNS: 1, Devices: with(func(d *Device) { d.NVLinks = make([]NVLink, 37) })}, wantErr: "37 NVLinks, want at most 36"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("validate error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
