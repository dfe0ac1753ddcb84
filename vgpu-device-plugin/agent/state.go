package agent

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/notify"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// configPoll is how often the watched configuration's generation is checked.
const configPoll = 2 * time.Second

// state is the node's current inventory and the signal every consumer waits
// on (inventory, health or MIG geometry changed).
type state struct {
	node    string
	gpus    []nvidia.GPU
	unit    nvidia.MemoryUnit
	inv     atomic.Pointer[nvidia.Inventory]
	gen     atomic.Uint64
	changed notify.Signal
}

func (s *state) inventory() *nvidia.Inventory { return s.inv.Load() }

// apply builds the inventory of a configuration generation.
func (s *state) apply(cfg *config.Config, gen uint64) {
	if s.gen.Load() == gen && s.inv.Load() != nil {
		return
	}
	inv := nvidia.NewInventory(s.node, s.gpus, cfg, s.unit)
	s.inv.Store(inv)
	s.gen.Store(gen)
	klog.InfoS("Device inventory", "node", s.node, "generation", gen, "cards", len(inv.Cards),
		"filtered", inv.Filtered, "mode", inv.Settings.OperatingMode, "splitCount", inv.Settings.DeviceSplitCount,
		"memoryScaling", inv.Settings.DeviceMemoryScaling, "coreScaling", inv.Settings.DeviceCoreScaling)
	s.changed.Broadcast()
}

// follow applies the loader's configuration whenever its generation moves.
func (s *state) follow(ctx context.Context, snapshot func() (*config.Config, uint64)) {
	t := time.NewTicker(configPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.apply(snapshot())
		}
	}
}

// forward rebroadcasts another signal on the state's (health changes).
func (s *state) forward(ctx context.Context, c func() <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c():
			s.changed.Broadcast()
		}
	}
}

// migNotifier signals the state after each MIG change.
type migNotifier struct {
	mig *nvidia.MIG
	s   *state
}

func (m migNotifier) Apply(card nvidia.Card, catalogue []config.AllowedMIGGeometries, group string, pos int, others bool) (string, error) {
	id, err := m.mig.Apply(card, catalogue, group, pos, others)
	m.s.changed.Broadcast()
	return id, err
}
