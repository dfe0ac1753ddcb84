package monitor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// PodByUID finds a pod on this node.
type PodByUID interface {
	ByUID(uid string) (*v1.Pod, bool)
}

// Collector is a prometheus.Collector reading NVML and the shared regions on
// every scrape.
type Collector struct {
	lib       nvml.Interface
	inventory func() *nvidia.Inventory
	pods      PodByUID
	cacheDir  string

	hostMem, hostUtil                        *prometheus.Desc
	ctrMemUsed, ctrMemLimit, ctrSM, ctrSMLim *prometheus.Desc
	ctrSMMode, ctrHostMem                    *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector reads host metrics for the inventory's cards through lib and
// container metrics from cacheDir/containers.
func NewCollector(lib nvml.Interface, inventory func() *nvidia.Inventory, pods PodByUID, cacheDir string) *Collector {
	host := []string{"deviceidx", "deviceuuid"}
	ctr := []string{"podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid"}
	return &Collector{
		lib: lib, inventory: inventory, pods: pods, cacheDir: cacheDir,
		hostMem:     prometheus.NewDesc("HostGPUMemoryUsage", "GPU device memory used, bytes", host, nil),
		hostUtil:    prometheus.NewDesc("HostCoreUtilization", "GPU utilisation, percent", host, nil),
		ctrMemUsed:  prometheus.NewDesc("vGPU_device_memory_usage_in_bytes", "Device memory used by the container", ctr, nil),
		ctrMemLimit: prometheus.NewDesc("vGPU_device_memory_limit_in_bytes", "Device memory limit of the container", ctr, nil),
		ctrSM:       prometheus.NewDesc("vGPU_device_sm_utilization_percent", "SM utilisation of the container, percent", ctr, nil),
		ctrSMLim:    prometheus.NewDesc("vGPU_device_sm_limit_percent", "SM limit of the container, percent (0: none)", ctr, nil),
		ctrHostMem: prometheus.NewDesc("vGPU_device_memory_host_backed_in_bytes",
			"Of the container's device memory usage, what libvgpu serves from host memory because the card is full (oversubscription)", ctr, nil),
		ctrSMMode: prometheus.NewDesc("vGPU_device_sm_limit_mode",
			"How libvgpu enforces the SM limit: 0 no limit or idle, 1 per-process utilisation, 2 device-wide utilisation (never above the share), 3 not enforced (no utilisation from NVML)", ctr, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hostMem, c.hostUtil, c.ctrMemUsed, c.ctrMemLimit, c.ctrSM, c.ctrSMLim, c.ctrSMMode, c.ctrHostMem} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.collectHost(ch)
	c.collectContainers(ch)
}

func (c *Collector) collectHost(ch chan<- prometheus.Metric) {
	for _, card := range c.inventory().Cards {
		dev, ret := c.lib.DeviceGetHandleByUUID(card.UUID)
		if ret != nvml.SUCCESS {
			klog.V(2).InfoS("Cannot read the card for metrics", "uuid", card.UUID, "err", ret)
			continue
		}
		idx := strconv.Itoa(card.Index)
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(c.hostMem, prometheus.GaugeValue, float64(mem.Used), idx, card.UUID)
		}
		if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(c.hostUtil, prometheus.GaugeValue, float64(u.Gpu), idx, card.UUID)
		}
	}
}

func (c *Collector) collectContainers(ch chan<- prometheus.Metric) {
	dirs, err := os.ReadDir(filepath.Join(c.cacheDir, allocate.ContainersDir))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Cannot list the containers' shared regions", "dir", c.cacheDir)
		}
		return
	}
	for _, d := range dirs {
		uid, ctrName, ok := strings.Cut(d.Name(), "_")
		if !d.IsDir() || !ok {
			continue
		}
		pod, found := c.pods.ByUID(uid)
		if !found {
			continue // a deleted pod's files, left to the Cleaner
		}
		files, _ := filepath.Glob(filepath.Join(c.cacheDir, allocate.ContainersDir, d.Name(), "*.cache"))
		for _, f := range files {
			r, err := ReadRegion(f)
			if err != nil {
				klog.V(4).InfoS("Skipping a shared region", "file", f, "err", err)
				continue
			}
			for i := 0; i < r.DeviceCount; i++ {
				labels := []string{pod.Namespace, pod.Name, ctrName, strconv.Itoa(i), r.UUID[i]}
				ch <- prometheus.MustNewConstMetric(c.ctrMemUsed, prometheus.GaugeValue, float64(r.MemUsed[i]), labels...)
				ch <- prometheus.MustNewConstMetric(c.ctrMemLimit, prometheus.GaugeValue, float64(r.MemLimit[i]), labels...)
				ch <- prometheus.MustNewConstMetric(c.ctrSM, prometheus.GaugeValue, float64(r.SMUtil[i]), labels...)
				ch <- prometheus.MustNewConstMetric(c.ctrSMLim, prometheus.GaugeValue, float64(r.SMLimit[i]), labels...)
				ch <- prometheus.MustNewConstMetric(c.ctrSMMode, prometheus.GaugeValue, float64(r.SMMode[i]), labels...)
				ch <- prometheus.MustNewConstMetric(c.ctrHostMem, prometheus.GaugeValue, float64(r.HostMiB[i])*(1<<20), labels...)
			}
		}
	}
}
