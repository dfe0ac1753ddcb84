package nvidia

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/config"
)

// MIG partitions cards into the geometries of the device configuration's
// knownMigGeometries catalogue and finds the MIG devices of a geometry by
// position. Positions count a geometry's instances in catalogue order (the
// first template's instances first), which is how the scheduler names them in
// "UUID[group-position]"; within one profile, instances are ordered by
// placement start and then GPU instance ID, so the numbering survives an
// agent restart. Create it once per NVML library; methods are safe for
// concurrent use (partitioning is serialised).
type MIG struct {
	lib nvml.Interface
	mu  sync.Mutex
}

// NewMIG returns a MIG manager over lib.
func NewMIG(lib nvml.Interface) *MIG {
	return &MIG{lib: lib}
}

// instance is one GPU instance of a card with the profile it was made from.
type instance struct {
	profile string
	gi      nvml.GpuInstance
	info    nvml.GpuInstanceInfo
}

// Geometry returns the card's geometry group in the catalogue, or "" when the
// card has no GPU instances or they form no known group.
func (m *MIG) Geometry(card Card, catalogue []config.AllowedMIGGeometries) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dev, err := m.device(card.UUID)
	if err != nil {
		return "", err
	}
	insts, err := listInstances(dev)
	if err != nil || len(insts) == 0 {
		return "", err
	}
	for _, g := range geometriesFor(catalogue, card.Name) {
		if sameLayout(insts, g.Instances) {
			return g.Group, nil
		}
	}
	return "", nil
}

// Apply makes the card run the catalogue geometry group and returns the UUID
// of the MIG device at position pos. A card already in that geometry is left
// as it is; otherwise its instances are destroyed and the geometry created,
// which othersInUse (instances handed to other containers) forbids.
func (m *MIG) Apply(card Card, catalogue []config.AllowedMIGGeometries, group string, pos int, othersInUse bool) (string, error) {
	templates, err := templatesFor(catalogue, card.Name, group)
	if err != nil {
		return "", err
	}
	total := 0
	for _, t := range templates {
		total += int(t.Count)
	}
	if pos < 0 || pos >= total {
		return "", fmt.Errorf("MIG position %d of geometry %s on %s: want 0..%d: %w", pos, group, card.UUID, total-1, ErrNoGeometry)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dev, err := m.device(card.UUID)
	if err != nil {
		return "", err
	}
	if err := ensureMIGEnabled(dev, card.UUID); err != nil {
		return "", err
	}
	insts, err := listInstances(dev)
	if err != nil {
		return "", err
	}
	if !sameLayout(insts, templates) {
		if othersInUse && len(insts) > 0 {
			return "", fmt.Errorf("switch %s to MIG geometry %s: %w", card.UUID, group, ErrMIGBusy)
		}
		klog.InfoS("Repartitioning GPU", "uuid", card.UUID, "geometry", group, "instancesDestroyed", len(insts))
		if err := destroyAll(insts); err != nil {
			return "", fmt.Errorf("repartition %s: %w", card.UUID, err)
		}
		if insts, err = createLayout(dev, templates); err != nil {
			return "", fmt.Errorf("repartition %s into %s: %w", card.UUID, group, err)
		}
	}
	chosen := orderByTemplate(insts, templates)[pos]
	if err := ensureComputeInstance(chosen.gi, profiles(dev)[chosen.profile].SliceCount); err != nil {
		return "", fmt.Errorf("MIG position %d of %s: %w", pos, card.UUID, err)
	}
	return migDeviceUUID(dev, chosen.info)
}

func (m *MIG) device(uuid string) (nvml.Device, error) {
	dev, ret := m.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get GPU %s: %w: %w", uuid, ErrUnknownDevice, ret)
	}
	return dev, nil
}

// geometriesFor returns the catalogue's geometries for a model, matching the
// models as substrings of the product name, as upstream does.
func geometriesFor(catalogue []config.AllowedMIGGeometries, name string) []config.MIGGeometry {
	for _, e := range catalogue {
		if slices.ContainsFunc(e.Models, func(m string) bool { return m != "" && strings.Contains(name, m) }) {
			return e.Geometries
		}
	}
	return nil
}

func templatesFor(catalogue []config.AllowedMIGGeometries, name, group string) ([]config.MIGTemplate, error) {
	for _, g := range geometriesFor(catalogue, name) {
		if g.Group == group {
			return g.Instances, nil
		}
	}
	return nil, fmt.Errorf("MIG geometry %q for %q: %w", group, name, ErrNoGeometry)
}

func ensureMIGEnabled(dev nvml.Device, uuid string) error {
	current, _, ret := dev.GetMigMode()
	if ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	activation, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	if ret != nvml.SUCCESS || activation != nvml.SUCCESS {
		return fmt.Errorf("enable MIG on %s (set %v, activation %v): %w", uuid, ret, activation, ErrMIGDisabled)
	}
	klog.InfoS("Enabled MIG mode", "uuid", uuid)
	return nil
}

// profiles maps MIG profile names ("1g.5gb", "1g.5gb+me") to the card's GPU
// instance profiles.
func profiles(dev nvml.Device) map[string]nvml.GpuInstanceProfileInfo {
	out := map[string]nvml.GpuInstanceProfileInfo{}
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		suffix, ok := profileSuffix(id)
		if !ok {
			continue
		}
		info, ret := dev.GetGpuInstanceProfileInfo(id)
		if ret != nvml.SUCCESS || info.SliceCount == 0 {
			continue
		}
		name := fmt.Sprintf("%dg.%dgb%s", info.SliceCount, (info.MemorySizeMB+1023)/1024, suffix)
		if _, dup := out[name]; !dup {
			out[name] = info
		}
	}
	return out
}

// profileSuffix is the name suffix NVIDIA gives a GPU instance profile
// variant; ok is false for variants this agent does not create.
func profileSuffix(id int) (string, bool) {
	switch id {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE,
		nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GPU_INSTANCE_PROFILE_6_SLICE, nvml.GPU_INSTANCE_PROFILE_7_SLICE,
		nvml.GPU_INSTANCE_PROFILE_8_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2:
		return "", true
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		return "+me", true
	}
	return "", false
}

// listInstances returns every GPU instance of the card.
func listInstances(dev nvml.Device) ([]instance, error) {
	var out []instance
	for name, p := range profiles(dev) {
		p := p
		gis, ret := dev.GetGpuInstances(&p)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("list %s instances: %w", name, ret)
		}
		for _, gi := range gis {
			info, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("read %s instance: %w", name, ret)
			}
			out = append(out, instance{profile: name, gi: gi, info: info})
		}
	}
	return out, nil
}

// sameLayout reports whether the instances are exactly the templates.
func sameLayout(insts []instance, templates []config.MIGTemplate) bool {
	want := map[string]int{}
	n := 0
	for _, t := range templates {
		want[t.Name] += int(t.Count)
		n += int(t.Count)
	}
	if n != len(insts) {
		return false
	}
	for _, in := range insts {
		want[in.profile]--
	}
	for _, v := range want {
		if v != 0 {
			return false
		}
	}
	return true
}

// orderByTemplate numbers the instances by position.
func orderByTemplate(insts []instance, templates []config.MIGTemplate) []instance {
	sorted := slices.Clone(insts)
	slices.SortFunc(sorted, func(a, b instance) int {
		return cmp.Or(cmp.Compare(a.info.Placement.Start, b.info.Placement.Start), cmp.Compare(a.info.Id, b.info.Id))
	})
	out := make([]instance, 0, len(insts))
	for _, t := range templates {
		taken := 0
		for _, in := range sorted {
			if in.profile == t.Name && taken < int(t.Count) {
				out = append(out, in)
				taken++
			}
		}
	}
	return out
}

// fullComputeProfile is the compute instance profile spanning a whole GPU
// instance of the given slice count.
func fullComputeProfile(slices uint32) (int, bool) {
	switch slices {
	case 1:
		return nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, true
	case 2:
		return nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, true
	case 3:
		return nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, true
	case 4:
		return nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, true
	case 6:
		return nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, true
	case 7:
		return nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, true
	case 8:
		return nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE, true
	}
	return 0, false
}

// computeInstances returns the compute instances of a GPU instance.
func computeInstances(gi nvml.GpuInstance) []nvml.ComputeInstance {
	var out []nvml.ComputeInstance
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		p, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		cis, ret := gi.GetComputeInstances(&p)
		if ret == nvml.SUCCESS {
			out = append(out, cis...)
		}
	}
	return out
}

func destroyAll(insts []instance) error {
	var errs []error
	for _, in := range insts {
		for _, ci := range computeInstances(in.gi) {
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				errs = append(errs, fmt.Errorf("destroy compute instance in GPU instance %d: %w", in.info.Id, ret))
			}
		}
		if ret := in.gi.Destroy(); ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("destroy GPU instance %d: %w", in.info.Id, ret))
		}
	}
	return errors.Join(errs...)
}

// createLayout creates the templates' GPU instances, each with one compute
// instance spanning it.
func createLayout(dev nvml.Device, templates []config.MIGTemplate) ([]instance, error) {
	known := profiles(dev)
	var out []instance
	for _, t := range templates {
		p, ok := known[t.Name]
		if !ok {
			return out, fmt.Errorf("MIG profile %q: the GPU does not offer it: %w", t.Name, ErrNoGeometry)
		}
		for i := 0; i < int(t.Count); i++ {
			gi, ret := dev.CreateGpuInstance(&p)
			if ret != nvml.SUCCESS {
				return out, fmt.Errorf("create GPU instance %s: %w", t.Name, ret)
			}
			info, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				return out, fmt.Errorf("read GPU instance %s: %w", t.Name, ret)
			}
			out = append(out, instance{profile: t.Name, gi: gi, info: info})
			if err := ensureComputeInstance(gi, p.SliceCount); err != nil {
				return out, fmt.Errorf("GPU instance %s: %w", t.Name, err)
			}
		}
	}
	return out, nil
}

func ensureComputeInstance(gi nvml.GpuInstance, slices uint32) error {
	if len(computeInstances(gi)) > 0 {
		return nil
	}
	id, ok := fullComputeProfile(slices)
	if !ok {
		return fmt.Errorf("no compute instance profile for %d slices: %w", slices, ErrNoGeometry)
	}
	p, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get compute instance profile: %w", ret)
	}
	if _, ret := gi.CreateComputeInstance(&p); ret != nvml.SUCCESS {
		return fmt.Errorf("create compute instance: %w", ret)
	}
	return nil
}

// migDeviceUUID finds the MIG device of a GPU instance and returns its UUID.
func migDeviceUUID(dev nvml.Device, info nvml.GpuInstanceInfo) (string, error) {
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("count MIG devices: %w", ret)
	}
	for i := 0; i < n; i++ {
		mdev, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		giID, ret := mdev.GetGpuInstanceId()
		if ret != nvml.SUCCESS || uint32(giID) != info.Id {
			continue
		}
		uuid, ret := mdev.GetUUID()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("MIG device UUID of GPU instance %d: %w", info.Id, ret)
		}
		return uuid, nil
	}
	return "", fmt.Errorf("no MIG device for GPU instance %d: %w", info.Id, nvml.ERROR_NOT_FOUND)
}
