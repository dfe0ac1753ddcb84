package config

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// configMap builds the device ConfigMap at a resourceVersion.
func configMap(resourceVersion, doc string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       DefaultConfigMapNamespace,
			Name:            DefaultConfigMapName,
			ResourceVersion: resourceVersion,
		},
		Data: map[string]string{ConfigKey: doc},
	}
}

func splitCount(n int) string { return fmt.Sprintf("nvidia:\n  deviceSplitCount: %d\n", n) }

// TestLoaderLifecycle walks one Loader through the life of a ConfigMap;
// each step depends on the ones before it.
func TestLoaderLifecycle(t *testing.T) {
	start := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	recorder := record.NewFakeRecorder(16)
	l := NewLoader(LoaderOptions{Recorder: recorder, Clock: clock})

	withSplit := func(n int32) *Config {
		c := Default()
		c.NVIDIA.DeviceSplitCount = n
		return c
	}
	steps := []struct {
		name   string
		do     func()
		want   *Config
		gen    uint64
		source string
		// lastErr and event are substrings; empty means none expected.
		lastErr string
		event   string
		since   time.Time
	}{
		{
			name: "starts with defaults",
			do:   func() {},
			want: Default(), gen: 1,
		},
		{
			name: "good document replaces the defaults",
			do:   func() { l.Apply(configMap("1", splitCount(4))) },
			want: withSplit(4), gen: 2, source: "kube-system/volcano-vgpu-device-config@1", since: start.Add(1 * time.Minute),
		},
		{
			name: "resync of the same resourceVersion does nothing",
			do:   func() { l.Apply(configMap("1", splitCount(4))) },
			want: withSplit(4), gen: 2, source: "kube-system/volcano-vgpu-device-config@1", since: start.Add(1 * time.Minute),
		},
		{
			name: "bad edit is rejected and the last good config keeps serving",
			do:   func() { l.Apply(configMap("2", splitCount(0))) },
			want: withSplit(4), gen: 2, source: "kube-system/volcano-vgpu-device-config@1", since: start.Add(1 * time.Minute),
			lastErr: "nvidia.deviceSplitCount: Invalid value: 0: must be between 1 and 1000",
			event:   "Warning InvalidDeviceConfig Rejected device-config.yaml: read device config from ConfigMap kube-system/volcano-vgpu-device-config key device-config.yaml: validate device config: nvidia.deviceSplitCount: Invalid value: 0",
		},
		{
			name: "a second bad edit is reported too",
			do:   func() { l.Apply(configMap("3", "nvidia:\n  splitCount: 2\n")) },
			want: withSplit(4), gen: 2, source: "kube-system/volcano-vgpu-device-config@1", since: start.Add(1 * time.Minute),
			lastErr: "nvidia.splitCount: Forbidden: unknown field",
			event:   "Still serving generation 2 (kube-system/volcano-vgpu-device-config@1)",
		},
		{
			name: "good edit recovers",
			do:   func() { l.Apply(configMap("4", splitCount(6))) },
			want: withSplit(6), gen: 3, source: "kube-system/volcano-vgpu-device-config@4", since: start.Add(5 * time.Minute),
		},
		{
			name: "edit that changes nothing effective keeps the generation",
			do:   func() { l.Apply(configMap("5", "# comment only changed\n"+splitCount(6))) },
			want: withSplit(6), gen: 3, source: "kube-system/volcano-vgpu-device-config@5", since: start.Add(5 * time.Minute),
		},
		{
			name: "ConfigMap without the key is rejected",
			do: func() {
				cm := configMap("6", "")
				cm.Data = map[string]string{"other.yaml": ""}
				l.Apply(cm)
			},
			want: withSplit(6), gen: 3, source: "kube-system/volcano-vgpu-device-config@5", since: start.Add(5 * time.Minute),
			lastErr: `key "device-config.yaml" not found`,
			event:   `key "device-config.yaml" not found`,
		},
		{
			name: "delete falls back to defaults and clears the error",
			do:   func() { l.Delete() },
			want: Default(), gen: 4, since: start.Add(8 * time.Minute),
		},
		{
			name: "delete again changes nothing",
			do:   func() { l.Delete() },
			want: Default(), gen: 4, since: start.Add(8 * time.Minute),
		},
		{
			name: "recreated ConfigMap is served again",
			do:   func() { l.Apply(configMap("7", splitCount(4))) },
			want: withSplit(4), gen: 5, source: "kube-system/volcano-vgpu-device-config@7", since: start.Add(10 * time.Minute),
		},
		{
			name: "nil ConfigMap is a delete",
			do:   func() { l.Apply(nil) },
			want: Default(), gen: 6, since: start.Add(11 * time.Minute),
		},
	}
	for i, step := range steps {
		clock.SetTime(start.Add(time.Duration(i) * time.Minute))
		step.do()
		if diff := cmp.Diff(step.want, l.Current()); diff != "" {
			t.Errorf("step %q: Current() mismatch (-want +got):\n%s", step.name, diff)
		}
		cfg, gen := l.Snapshot()
		if gen != step.gen || l.Generation() != step.gen || cfg != l.Current() {
			t.Errorf("step %q: Snapshot() = (%p, %d), Generation() = %d; want Current() and generation %d",
				step.name, cfg, gen, l.Generation(), step.gen)
		}
		checkLastError(t, step.name, l.LastError(), step.lastErr)
		status := l.Status()
		if status.Source != step.source || status.Generation != step.gen || !status.Since.Equal(step.since) {
			t.Errorf("step %q: Status() = {Source: %q, Generation: %d, Since: %v}, want {%q, %d, %v}",
				step.name, status.Source, status.Generation, status.Since, step.source, step.gen, step.since)
		}
		if step.lastErr != "" && !status.LastErrorTime.Equal(clock.Now()) {
			t.Errorf("step %q: Status().LastErrorTime = %v, want %v", step.name, status.LastErrorTime, clock.Now())
		}
		checkEvent(t, step.name, recorder, step.event)
	}
}

func checkLastError(t *testing.T, step string, got error, want string) {
	t.Helper()
	switch {
	case want == "" && got != nil:
		t.Errorf("step %q: LastError() = %v, want nil", step, got)
	case want != "" && got == nil:
		t.Errorf("step %q: LastError() = nil, want an error containing %q", step, want)
	case want != "" && !strings.Contains(got.Error(), want):
		t.Errorf("step %q: LastError() = %q, want it to contain %q", step, got, want)
	}
}

// checkEvent takes at most one event from the fake recorder (whose channel
// is filled synchronously by Apply) and checks it.
func checkEvent(t *testing.T, step string, recorder *record.FakeRecorder, want string) {
	t.Helper()
	select {
	case got := <-recorder.Events:
		if want == "" {
			t.Errorf("step %q: unexpected event %q", step, got)
		} else if !strings.Contains(got, want) {
			t.Errorf("step %q: event %q, want it to contain %q", step, got, want)
		}
	default:
		if want != "" {
			t.Errorf("step %q: no event, want one containing %q", step, want)
		}
	}
}

func TestLoaderRejectsWithoutRecorder(t *testing.T) {
	l := NewLoader(LoaderOptions{})
	l.Apply(configMap("1", "nvidia: {deviceSplitCount: -1}\n"))
	if l.LastError() == nil || l.Generation() != 1 {
		t.Errorf("after a bad edit: LastError() = %v, Generation() = %d; want an error and 1", l.LastError(), l.Generation())
	}
}

func TestLoaderEventMessageIsBounded(t *testing.T) {
	recorder := record.NewFakeRecorder(1)
	l := NewLoader(LoaderOptions{Recorder: recorder})
	var doc strings.Builder
	doc.WriteString("nvidia:\n")
	for i := range 200 {
		fmt.Fprintf(&doc, "  unknownKeyNumber%03d: ü\n", i)
	}
	l.Apply(configMap("1", doc.String()))
	event := <-recorder.Events
	message := strings.TrimPrefix(event, "Warning "+ReasonInvalidDeviceConfig+" ")
	if len(message) > maxEventMessage || !strings.HasSuffix(message, "...") {
		t.Errorf("event message is %d bytes ending %q, want at most %d ending \"...\"", len(message), message[len(message)-5:], maxEventMessage)
	}
}

// TestLoaderConcurrentReaders checks under -race that readers always see a
// configuration together with its own generation while writers publish.
func TestLoaderConcurrentReaders(t *testing.T) {
	l := NewLoader(LoaderOptions{})
	const edits = 50
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cfg, gen := l.Snapshot()
				// Edit k (generation k+1) sets deviceSplitCount to k.
				if gen > 1 && int64(cfg.NVIDIA.DeviceSplitCount) != int64(gen)-1 {
					t.Errorf("Snapshot() = deviceSplitCount %d with generation %d", cfg.NVIDIA.DeviceSplitCount, gen)
					return
				}
				_ = l.Current().VNPUs.Mode()
				_ = l.LastError()
			}
		}()
	}
	for k := 1; k <= edits; k++ {
		l.Apply(configMap(fmt.Sprint(k), splitCount(k)))
	}
	cancel()
	wg.Wait()
	if got := l.Generation(); got != edits+1 {
		t.Errorf("Generation() = %d, want %d", got, edits+1)
	}
}

func TestStartWithoutClient(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		configMap string
		wantErr   string
	}{
		{name: "defaults only", namespace: "kube-system", configMap: DefaultConfigMapName},
		{name: "bad namespace", namespace: "Kube_System", configMap: DefaultConfigMapName, wantErr: `invalid ConfigMap namespace "Kube_System"`},
		{name: "empty name", namespace: "kube-system", configMap: "", wantErr: `invalid ConfigMap name ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLoader(LoaderOptions{})
			err := l.Start(context.Background(), tc.namespace, tc.configMap)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Start() error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Start() error = %v, want it to contain %q", err, tc.wantErr)
			}
			l.Stop()
			if l.Generation() != 1 || l.LastError() != nil {
				t.Errorf("after Start/Stop without client: Generation() = %d, LastError() = %v; want 1, nil", l.Generation(), l.LastError())
			}
		})
	}
}

// TestStartSwitchAndStop drives the watch plumbing against an address where
// no API server listens (loopback port 1 refuses connections): the informer
// keeps failing to list, so nothing is applied, but starting, switching to
// another ConfigMap and stopping must neither block nor race.
func TestStartSwitchAndStop(t *testing.T) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("build client: %v", err)
	}
	l := NewLoader(LoaderOptions{Client: client})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, name := range []string{"config-a", "config-a", "config-b"} {
			if err := l.Start(ctx, "kube-system", name); err != nil {
				t.Errorf("Start(%s) error: %v", name, err)
			}
		}
		l.Stop()
		l.Stop()
		// A watch whose context ended is restarted by the next Start.
		ended, end := context.WithCancel(ctx)
		end()
		if err := l.Start(ended, "kube-system", "config-b"); err != nil {
			t.Errorf("Start() with an ended context error: %v", err)
		}
		if err := l.Start(ctx, "kube-system", "config-b"); err != nil {
			t.Errorf("Start() after the context ended error: %v", err)
		}
		l.Stop()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Start/Stop did not return within a minute")
	}
	if l.Generation() != 1 {
		t.Errorf("Generation() = %d, want 1 (nothing could be read)", l.Generation())
	}
}
