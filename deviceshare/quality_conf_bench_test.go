package deviceshare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vgpushare/vshare/bench/quality"
)

// BenchmarkShippedConfPlacement measures what the placement-quality table
// (docs/quality.md) leaves out: in the volcano-scheduler.conf the chart
// ships, Volcano's nodeorder and binpack plugins add their own node scores
// to this plugin's. On 35-node samples of three tuning traces it places
// the same arrivals with the fragment policy deciding alone ("alone", the
// simulator's model) and under the shipped configuration ("shipped"), and
// reports the GPU allocated when the arrivals stop (130% of capacity).
// "shipped-weight100" is the shipped configuration with
// deviceshare.ScheduleWeight 100 (its maximum) instead of 10, so that the device score
// outweighs the other plugins'. All break exact ties by the simulator's
// node rank.
//
//	go test -run '^$' -bench ShippedConfPlacement -benchtime 1x ./deviceshare/
func BenchmarkShippedConfPlacement(b *testing.B) {
	shipped := shippedSchedulerConf(b)
	alone := aloneConf("fragment", true)
	for _, trace := range []string{"default", "cpu250", "gpuspec33"} {
		confs := []struct{ name, conf string }{{"alone", alone}, {"shipped", shipped},
			{"shipped-weight100", strings.Replace(shipped, "deviceshare.ScheduleWeight: 10\n", "deviceshare.ScheduleWeight: 100\n", 1)}}
		if !strings.Contains(shipped, "deviceshare.ScheduleWeight: 10\n") {
			b.Fatalf("shipped conf has no ScheduleWeight 10:\n%s", shipped)
		}
		for _, cf := range confs {
			b.Run("trace="+trace+"/conf="+cf.name, func(b *testing.B) {
				tr := sampleTrace(b, trace, 35)
				var alloc, failed float64
				for i := 0; i < b.N; i++ {
					arr := quality.Arrange(tr, 42+int64(i))
					got := placeInSessionsWith(b, tr, arr, cf.conf)
					var used int64
					for j, pl := range got {
						if pl.OK {
							used += arr.Pods[j].GPUMilli()
						} else {
							failed++
						}
					}
					alloc += 100 * float64(used) / float64(tr.Capacity())
				}
				b.ReportMetric(alloc/float64(b.N), "alloc-%")
				b.ReportMetric(failed/float64(b.N), "failed-pods")
			})
		}
	}
}

// shippedSchedulerConf is the chart's rendered volcano-scheduler.conf
// (deploy/manifests/vshare.yaml) with SchedulePolicy fragment and
// the rankorder tie-break ahead of every plugin.
func shippedSchedulerConf(b *testing.B) string {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "manifests", "vshare.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cm struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil || cm.Kind != "ConfigMap" || cm.Metadata.Name != "volcano-scheduler-configmap" {
			continue
		}
		conf := cm.Data["volcano-scheduler.conf"]
		if !strings.Contains(conf, `deviceshare.SchedulePolicy: "binpack"`) || !strings.Contains(conf, "    - plugins:\n") && !strings.Contains(conf, "- plugins:\n") {
			b.Fatalf("unexpected shipped conf:\n%s", conf)
		}
		conf = strings.Replace(conf, `deviceshare.SchedulePolicy: "binpack"`, `deviceshare.SchedulePolicy: "fragment"`, 1)
		conf = strings.Replace(conf, "- plugins:\n", "- plugins:\n  - name: rankorder\n", 1)
		return conf
	}
	b.Fatal("no volcano-scheduler-configmap in deploy/manifests/vshare.yaml")
	return ""
}
