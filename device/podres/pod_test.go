package podres

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const other = v1.ResourceName("example.com/gadget")

// podWith returns a pod whose containers (init: true for init containers)
// ask for res=value each.
func podWith(init bool, values ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	for _, v := range values {
		c := v1.Container{Name: "c-" + v, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{res: resource.MustParse(v)}}}
		if init {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
	}
	return pod
}

func TestAsks(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		res  []v1.ResourceName
		want bool
	}{
		{name: "no containers", pod: podWith(false), res: []v1.ResourceName{res}},
		{name: "zero", pod: podWith(false, "0"), res: []v1.ResourceName{res}},
		{name: "container", pod: podWith(false, "0", "2"), res: []v1.ResourceName{other, res}, want: true},
		{name: "init container", pod: podWith(true, "1"), res: []v1.ResourceName{res}, want: true},
		{name: "negative counts as asking", pod: podWith(false, "-1"), res: []v1.ResourceName{res}, want: true},
		{name: "other resource", pod: podWith(false, "2"), res: []v1.ResourceName{other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Asks(tc.pod, tc.res...); got != tc.want {
				t.Errorf("Asks = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckInitContainers(t *testing.T) {
	if err := CheckInitContainers(podWith(false, "1"), "widgets", res); err != nil {
		t.Errorf("CheckInitContainers of a regular container: %v", err)
	}
	if err := CheckInitContainers(podWith(true, "0"), "widgets", res); err != nil {
		t.Errorf("CheckInitContainers of an init container asking for 0: %v", err)
	}
	err := CheckInitContainers(podWith(true, "0", "3"), "widgets", other, res)
	want := `pod ns/p init container "c-3": example.com/widget=3: widgets are only served to regular containers`
	if err == nil || err.Error() != want {
		t.Errorf("CheckInitContainers = %v, want %q", err, want)
	}
}

func TestReaderKeepsTheFirstError(t *testing.T) {
	c := &v1.Container{Name: "main", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		res: resource.MustParse("500m"), other: resource.MustParse("-1")}}}
	r := NewReader(c)
	if v, present := r.Whole(res, 10); v != 0 || !present {
		t.Errorf("Whole of an invalid value = %d, %v; want 0, true (as Whole)", v, present)
	}
	if v, present := r.Whole(other, 10); v != 0 || present {
		t.Errorf("Whole after an error = %d, %v; want 0, false", v, present)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "example.com/widget=500m") {
		t.Errorf("Err = %v, want the first error, naming example.com/widget=500m", err)
	}
	ok := NewReader(&v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{res: resource.MustParse("7")}}})
	if v, present := ok.Whole(res, 10); v != 7 || !present || ok.Err() != nil {
		t.Errorf("Whole = %d, %v (err %v); want 7, true, nil", v, present, ok.Err())
	}
}
