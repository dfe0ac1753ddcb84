package deviceplugin_test

import (
	"context"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
)

// ids lists the virtual devices "<card>-<i>" for i in is.
func ids(card string, is ...int) []string {
	out := make([]string, len(is))
	for k, i := range is {
		out[k] = deviceplugin.VirtualDeviceID(card, i)
	}
	return out
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestPreferByCard(t *testing.T) {
	avail := concat(ids("GPU-b", 0, 1, 2), ids("GPU-a", 2, 10, 1), ids("GPU-c", 0))
	tests := []struct {
		name  string
		avail []string
		must  []string
		size  int
		cards []string
		want  []string
	}{
		{name: "the scheduler's card", avail: avail, size: 1, cards: []string{"GPU-b"}, want: ids("GPU-b", 0)},
		{name: "the scheduler's cards in its order", avail: avail, size: 2, cards: []string{"GPU-c", "GPU-a"},
			want: concat(ids("GPU-c", 0), ids("GPU-a", 1))},
		{name: "no pod: one device per card, cards in UUID order, indexes numerically", avail: avail, size: 3,
			want: concat(ids("GPU-a", 1), ids("GPU-b", 0), ids("GPU-c", 0))},
		{name: "no pod, more devices than cards: seconds after every card has one", avail: avail, size: 5,
			want: concat(ids("GPU-a", 1), ids("GPU-b", 0), ids("GPU-c", 0), ids("GPU-a", 2), ids("GPU-b", 1))},
		{name: "must-include first, and it counts for its card", avail: avail, must: ids("GPU-b", 2), size: 2,
			cards: []string{"GPU-b", "GPU-c"}, want: concat(ids("GPU-b", 2), ids("GPU-c", 0))},
		{name: "a card with no free device left is filled from the others", avail: avail, size: 2,
			cards: []string{"GPU-gone", "GPU-a"}, want: concat(ids("GPU-a", 1), ids("GPU-b", 0))},
		{name: "cards beyond the size are ignored", avail: avail, size: 1, cards: []string{"GPU-c", "GPU-a"}, want: ids("GPU-c", 0)},
		{name: "too few available: empty, the kubelet chooses", avail: ids("GPU-a", 0), size: 2, cards: []string{"GPU-a"}},
		{name: "must-include not available: empty", avail: ids("GPU-a", 0), must: ids("GPU-z", 0), size: 1},
		{name: "more must-include than size: empty", avail: ids("GPU-a", 0, 1), must: ids("GPU-a", 0, 1), size: 1},
		{name: "size 0", avail: avail, size: 0, cards: []string{"GPU-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deviceplugin.PreferByCard(tt.avail, tt.must, tt.size, tt.cards)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PreferByCard (-want +got):\n%s", diff)
			}
			if len(got) > 0 || tt.size == 0 {
				if err := deviceplugin.CheckPreferred(tt.avail, tt.must, tt.size, got); err != nil {
					t.Errorf("answer not valid: %v", err)
				}
			}
		})
	}
}

// TestPreferByCardAlwaysValid: whatever the cards asked for, a request the
// kubelet can make (must-include among the available, size between their
// count and the available count) gets a valid answer.
func TestPreferByCardAlwaysValid(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cards := []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}
	for i := 0; i < 2000; i++ {
		var avail []string
		for _, c := range cards {
			for s := 0; s < 4; s++ {
				if r.Intn(2) == 0 {
					avail = append(avail, deviceplugin.VirtualDeviceID(c, s))
				}
			}
		}
		if len(avail) == 0 {
			continue
		}
		r.Shuffle(len(avail), func(a, b int) { avail[a], avail[b] = avail[b], avail[a] })
		must := avail[:r.Intn(min(3, len(avail))+1)]
		size := len(must) + r.Intn(len(avail)-len(must)+1)
		var want []string
		for k := r.Intn(5); k > 0; k-- {
			c := "GPU-unknown" // a card the node does not have
			if r.Intn(5) > 0 {
				c = cards[r.Intn(len(cards))]
			}
			want = append(want, c)
		}
		got := deviceplugin.PreferByCard(avail, must, size, want)
		if err := deviceplugin.CheckPreferred(avail, must, size, got); err != nil {
			t.Fatalf("available %v, must %v, size %d, cards %v: %v", avail, must, size, want, err)
		}
	}
}

func TestCheckPreferred(t *testing.T) {
	avail := ids("GPU-a", 0, 1, 2)
	for _, tt := range []struct {
		name string
		must []string
		size int
		got  []string
		ok   bool
	}{
		{name: "valid", must: ids("GPU-a", 1), size: 2, got: ids("GPU-a", 1, 0), ok: true},
		{name: "wrong size", size: 2, got: ids("GPU-a", 1)},
		{name: "not available", size: 1, got: ids("GPU-b", 0)},
		{name: "twice", size: 2, got: ids("GPU-a", 1, 1)},
		{name: "must-include left out", must: ids("GPU-a", 2), size: 1, got: ids("GPU-a", 0)},
	} {
		err := deviceplugin.CheckPreferred(avail, tt.must, tt.size, tt.got)
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckPreferred = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestCardOf(t *testing.T) {
	for id, want := range map[string]string{
		"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6-3": "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
		"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6":   "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", // last part is not a number
		"card-0-12": "card-0",
		"plain":     "plain",
	} {
		if got := deviceplugin.CardOf(id); got != want {
			t.Errorf("CardOf(%q) = %q, want %q", id, got, want)
		}
	}
}

type preferFunc func(context.Context, *pluginapi.ContainerPreferredAllocationRequest) []string

func (f preferFunc) PreferredCards(ctx context.Context, r *pluginapi.ContainerPreferredAllocationRequest) []string {
	return f(ctx, r)
}

// TestPluginServesPreferredAllocation: with a Preferrer the plugin registers
// and reports GetPreferredAllocationAvailable, and answers over its socket
// with devices of the Preferrer's cards.
func TestPluginServesPreferredAllocation(t *testing.T) {
	dir := fakekubelet.ShortTempDir(t)
	kubelet := fakekubelet.Start(t, dir)
	devs := &devices{list: []*pluginapi.Device{dev("GPU-a-0", "Healthy"), dev("GPU-b-0", "Healthy"), dev("GPU-b-1", "Healthy")}}
	p, err := deviceplugin.New(deviceplugin.Options{
		ResourceName: "volcano.sh/vgpu-number", SocketDir: dir, SocketName: "volcano-vgpu.sock",
		Devices: devs.get, Changed: devs.sig.C,
		Allocator: allocFunc(func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return nil, nil
		}),
		Preferrer: preferFunc(func(context.Context, *pluginapi.ContainerPreferredAllocationRequest) []string {
			return []string{"GPU-b"}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	if reg := kubelet.Wait(t); !reg.GetOptions().GetGetPreferredAllocationAvailable() {
		t.Errorf("registration options %v, want GetPreferredAllocationAvailable", reg.Options)
	}
	client := pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable {
		t.Fatalf("GetDevicePluginOptions = %v, %v; want GetPreferredAllocationAvailable", opts, err)
	}
	resp, err := client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"GPU-a-0", "GPU-b-0", "GPU-b-1"}, AllocationSize: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerResponses; len(got) != 1 || !cmp.Equal(got[0].DeviceIDs, []string{"GPU-b-0"}) {
		t.Errorf("GetPreferredAllocation = %v, want [GPU-b-0]", got)
	}
}
