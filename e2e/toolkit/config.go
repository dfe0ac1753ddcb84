package toolkit

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// DefaultContainerLibraryDir is where the driver's libraries go in a
// container: where the toolkit mounts them on Debian and Ubuntu hosts
// (the host path, which the loader searches without ld.so.cache there).
const DefaultContainerLibraryDir = "/usr/lib/x86_64-linux-gnu"

// defaultSupportedCapabilities are the capabilities of the toolkit's default
// supported-driver-capabilities.
var defaultSupportedCapabilities = []string{"compat32", "compute", "display", "graphics", "ngx", "utility", "video"}

// Config is the stand-in's config.toml. Keys of the real toolkit keep their
// names and meaning; the fake driver's section is the stand-in's own.
//
//	supported-driver-capabilities = "compute,utility"   # real key
//	[nvidia-container-runtime]
//	runtimes = ["/usr/sbin/runc"]                        # real key: the low-level runtime
//	[fake-driver]
//	device-dir = "/run/vshare/fakegpu"                   # fakedriver.StartDeviceNodes' dir
//	library-dir = "/opt/vshare/libvgpu/build/stub"       # the stub libcuda.so.1, libnvidia-ml.so.1
//	container-library-dir = "/usr/lib/x86_64-linux-gnu"  # where they go in a container
type Config struct {
	// SupportedDriverCapabilities limits the capabilities a container may
	// ask for, comma-separated; empty means the toolkit's default (every
	// capability it knows).
	SupportedDriverCapabilities string           `toml:"supported-driver-capabilities"`
	Runtime                     RuntimeConfig    `toml:"nvidia-container-runtime"`
	FakeDriver                  FakeDriverConfig `toml:"fake-driver"`
}

// RuntimeConfig is the [nvidia-container-runtime] section.
type RuntimeConfig struct {
	// Runtimes are the candidates for the low-level runtime: the first
	// that is an existing executable file is used, a name being looked up
	// in PATH (the toolkit's "Low-level Runtime Path"). Empty means
	// ["docker-runc", "runc"], the toolkit's default.
	Runtimes []string `toml:"runtimes"`
}

// FakeDriverConfig is the [fake-driver] section: where the fake driver's
// device nodes and user-space libraries are.
type FakeDriverConfig struct {
	// DeviceDir is the driver's device directory (StartDeviceNodes' dir):
	// nvidiactl, nvidia-uvm and nvidia<minor> per card. Required to give a
	// container anything.
	DeviceDir string `toml:"device-dir"`
	// LibraryDir holds the stub libcuda.so.1 and libnvidia-ml.so.1
	// (libvgpu/build/stub). Required to give a container anything.
	LibraryDir string `toml:"library-dir"`
	// ContainerLibraryDir is where the libraries are mounted in the
	// container; empty means DefaultContainerLibraryDir.
	ContainerLibraryDir string `toml:"container-library-dir"`
}

// ConfigPath is where nvidia-container-runtime reads its configuration:
// ${XDG_CONFIG_HOME}/nvidia-container-runtime/config.toml when
// XDG_CONFIG_HOME is set, /etc/nvidia-container-runtime/config.toml otherwise.
func ConfigPath(getenv func(string) string) string {
	base := "/etc"
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		base = x
	}
	return filepath.Join(base, "nvidia-container-runtime", "config.toml")
}

// LoadConfig reads the configuration at path, with the defaults applied. A
// missing file is the defaults alone, as for the real runtime; such a
// runtime passes containers that ask for nothing through and fails those
// that ask for a GPU (no fake driver configured).
func LoadConfig(fsys fs.FS, path string) (Config, error) {
	var c Config
	b, err := fs.ReadFile(fsys, strings.TrimPrefix(path, "/"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return c, fmt.Errorf("read config %s: %w", path, err)
	default:
		// Keys of the real toolkit that the stand-in does not model are
		// ignored, as a config.toml written for the real one carries them.
		if _, err := toml.Decode(string(b), &c); err != nil {
			return c, fmt.Errorf("parse config %s: %w", path, err)
		}
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c.withDefaults(), nil
}

// validate checks the paths, which must be absolute.
func (c *Config) validate() error {
	for _, f := range []struct{ name, value string }{
		{"fake-driver.device-dir", c.FakeDriver.DeviceDir},
		{"fake-driver.library-dir", c.FakeDriver.LibraryDir},
		{"fake-driver.container-library-dir", c.FakeDriver.ContainerLibraryDir},
	} {
		if f.value != "" && !filepath.IsAbs(f.value) {
			return fmt.Errorf("%s %q: want an absolute path", f.name, f.value)
		}
	}
	for _, capability := range splitList(c.SupportedDriverCapabilities) {
		if capability != "all" && !contains(defaultSupportedCapabilities, capability) {
			return fmt.Errorf("supported-driver-capabilities %q: capability %q, want some of %s",
				c.SupportedDriverCapabilities, capability, strings.Join(defaultSupportedCapabilities, ","))
		}
	}
	return nil
}

// withDefaults fills in what is not set.
func (c Config) withDefaults() Config {
	if len(c.Runtime.Runtimes) == 0 {
		c.Runtime.Runtimes = []string{"docker-runc", "runc"}
	}
	if c.FakeDriver.ContainerLibraryDir == "" {
		c.FakeDriver.ContainerLibraryDir = DefaultContainerLibraryDir
	}
	if caps := splitList(c.SupportedDriverCapabilities); len(caps) == 0 || contains(caps, "all") {
		c.SupportedDriverCapabilities = strings.Join(defaultSupportedCapabilities, ",")
	}
	return c
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty entries.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
