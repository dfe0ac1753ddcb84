package config

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReasonInvalidDeviceConfig is the reason of the Warning event recorded on
// the ConfigMap when an edit is rejected.
const ReasonInvalidDeviceConfig = "InvalidDeviceConfig"

// maxEventMessage keeps event messages within what the API server stores.
const maxEventMessage = 1024

// LoaderOptions configure a Loader. Every field may be left zero.
type LoaderOptions struct {
	// Client reads and watches the ConfigMap. Nil means defaults only: Start
	// logs and returns, and only Apply/Delete change the configuration.
	Client kubernetes.Interface
	// Recorder receives a Warning event (reason InvalidDeviceConfig) on the
	// ConfigMap for each rejected edit. Nil means no events.
	Recorder record.EventRecorder
	// Clock stamps Status times. Nil means the real clock.
	Clock clock.PassiveClock
}

// Status describes what a Loader is serving, for status pages and metrics.
type Status struct {
	// Generation is the Generation() of the configuration being served.
	Generation uint64
	// Source is "namespace/name@resourceVersion" of the ConfigMap the
	// configuration came from, or "" when serving defaults.
	Source string
	// Since is when the configuration being served took effect (zero for the
	// defaults installed by NewLoader).
	Since time.Time
	// LastError is why the latest edit was rejected; nil when it was accepted.
	LastError error
	// LastErrorTime is when LastError was set.
	LastErrorTime time.Time
}

// snapshot is one published configuration. Readers load it lock-free; it is
// never modified after it is stored.
type snapshot struct {
	cfg *Config
	gen uint64
}

// Loader keeps the device configuration current: it serves the last good
// configuration read from the ConfigMap, or the defaults while there is none.
// Create it once with NewLoader (the zero value is not usable) and share it;
// all methods are safe for concurrent use.
//
// Locking: readers (Current, Generation, Snapshot) load an atomic pointer and
// never block. mu serialises the writers (Apply, Delete) and guards status
// and lastSeen. watchMu serialises Start and Stop and guards active; it is
// never taken while mu is held, so a watch being stopped can still finish an
// Apply that is under way.
type Loader struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.PassiveClock

	current atomic.Pointer[snapshot]

	mu       sync.Mutex
	status   Status // Generation is filled in from current on read
	lastSeen string // source key of the last ConfigMap applied or rejected

	watchMu sync.Mutex
	active  *configMapWatch
}

// NewLoader returns a Loader serving Default() at generation 1.
func NewLoader(opts LoaderOptions) *Loader {
	l := &Loader{client: opts.Client, recorder: opts.Recorder, clock: opts.Clock}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	l.current.Store(&snapshot{cfg: Default(), gen: 1})
	return l
}

// Current returns the configuration being served; never nil. The value is
// shared and must not be modified (DeepCopy it first).
func (l *Loader) Current() *Config {
	return l.current.Load().cfg
}

// Generation returns a number that grows by one each time the effective
// configuration changes (starting at 1 for the defaults), so callers can
// rebuild derived state only when it moved. Use Snapshot to read the
// configuration and its generation consistently.
func (l *Loader) Generation() uint64 {
	return l.current.Load().gen
}

// Snapshot returns the configuration being served and its generation, read
// together.
func (l *Loader) Snapshot() (*Config, uint64) {
	s := l.current.Load()
	return s.cfg, s.gen
}

// LastError returns why the latest edit of the ConfigMap was rejected, or
// nil when it was accepted (or there was none).
func (l *Loader) LastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.LastError
}

// Status returns what the Loader is serving.
func (l *Loader) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.status
	s.Generation = l.Generation()
	return s
}

// Apply reads the ConfigMap's device-config.yaml. A good document becomes the
// configuration served (the generation moves when the effective configuration
// changes). A bad one, or a ConfigMap without the key, is rejected: it is
// logged, recorded as a Warning event on the ConfigMap and kept as LastError,
// and the last good configuration keeps serving. A nil ConfigMap is a Delete.
// Applying the same resourceVersion again (an informer resync) does nothing.
func (l *Loader) Apply(cm *v1.ConfigMap) {
	if cm == nil {
		l.Delete()
		return
	}
	event := l.apply(cm)
	if event != "" && l.recorder != nil {
		l.recorder.Event(cm, v1.EventTypeWarning, ReasonInvalidDeviceConfig, event)
	}
}

// apply does Apply's work under mu and returns the warning event to record,
// if any; events are recorded after mu is released.
func (l *Loader) apply(cm *v1.ConfigMap) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	source := fmt.Sprintf("%s/%s@%s", cm.Namespace, cm.Name, cm.ResourceVersion)
	if cm.ResourceVersion != "" && source == l.lastSeen {
		return ""
	}
	l.lastSeen = source
	now := l.clock.Now()

	cfg, err := FromConfigMap(cm)
	if err != nil {
		l.status.LastError = err
		l.status.LastErrorTime = now
		served := l.current.Load()
		klog.ErrorS(err, "Rejected device config; the last good configuration keeps serving",
			"configMap", klog.KObj(cm), "key", ConfigKey, "resourceVersion", cm.ResourceVersion,
			"servingGeneration", served.gen, "servingSource", sourceOrDefaults(l.status.Source))
		return truncate(fmt.Sprintf("Rejected %s: %v. Still serving generation %d (%s).",
			ConfigKey, err, served.gen, sourceOrDefaults(l.status.Source)), maxEventMessage)
	}
	l.status.LastError = nil
	l.status.LastErrorTime = time.Time{}
	if len(cfg.IgnoredSections) > 0 {
		klog.V(2).InfoS("Device config has sections for other vendors; ignoring them",
			"configMap", klog.KObj(cm), "sections", cfg.IgnoredSections)
	}
	l.publish(cfg, source, now)
	return ""
}

// Delete makes the defaults serve again, as when the ConfigMap is deleted.
func (l *Loader) Delete() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSeen = ""
	l.status.LastError = nil
	l.status.LastErrorTime = time.Time{}
	if l.status.Source == "" {
		return // already serving defaults
	}
	klog.InfoS("Device ConfigMap is gone; serving the default device config", "previousSource", l.status.Source)
	l.publish(Default(), "", l.clock.Now())
}

// publish makes cfg the served configuration; mu must be held.
func (l *Loader) publish(cfg *Config, source string, now time.Time) {
	old := l.current.Load()
	l.status.Source = source
	changed := ChangedPaths(old.cfg, cfg)
	if len(changed) == 0 {
		klog.V(2).InfoS("Device config unchanged", "source", sourceOrDefaults(source), "generation", old.gen)
		return
	}
	next := &snapshot{cfg: cfg, gen: old.gen + 1}
	l.current.Store(next)
	l.status.Since = now
	klog.V(2).InfoS("Device config changed", "source", sourceOrDefaults(source),
		"generation", next.gen, "changed", changed)
}

func sourceOrDefaults(source string) string {
	if source == "" {
		return "defaults"
	}
	return source
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
