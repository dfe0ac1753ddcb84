//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// kwokStages are kwok's "fast" pod-ready and pod-delete stages only: its
// default pod-complete stage matches pods owned by any kind named Job,
// Volcano Jobs included, and would complete them at once. A pod whose
// vGPU allocation is still pending with its node agent (bind-phase
// allocating) is not started: the kubelet starts containers only after
// admission, of which the device plugin's Allocate is part. (Started at
// bind, kwok also wrote such a pod's status twice, once more on the
// agent's bind-phase update, which arrives before kwok's first write.) A
// pod a fake kubelet failed at admission is not started either. A
// pod with a finalizer is not deleted by kwok: the fault campaign's fake
// kubelets hold the pods they admit that way and delete them themselves, as
// a kubelet confirms a pod's deletion only once it is done with it.
const kwokStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
    - key: '.metadata.annotations["volcano.sh/bind-phase"]'
      operator: 'NotIn'
      values: ['allocating']
    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Failed', 'Succeeded']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
  next:
    finalizers:
      empty: true
    delete: true
`

func (c *Cluster) startKwok(ctx context.Context) error {
	stages := filepath.Join(c.WorkDir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(kwokStages), 0o644); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	p, err := c.start("kwok", BinKwok, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--cidr=10.0.0.1/16",
		"--node-ip=127.0.0.1",
	}, nil)
	if err != nil {
		return err
	}
	// kwok has no readiness endpoint worth a port; a short look for an early
	// crash (bad flag, bad stage) is what the next steps need. Nodes it
	// manages become Ready, which AddGPUNode waits for.
	return stayUp(ctx, p, 2*time.Second)
}
