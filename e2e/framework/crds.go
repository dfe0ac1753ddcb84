//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// installCRDs creates Volcano's CRDs (config/crd/*/bases) from the volcano.sh/volcano module
// directory and waits until each is Established.
func (c *Cluster) installCRDs(ctx context.Context) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "volcano.sh/volcano")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locate volcano.sh/volcano: %w", err)
	}
	// jobflow's CRDs too: vc-controller-manager watches them.
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "*", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Volcano CRDs found under %s (err %v)", strings.TrimSpace(string(out)), err)
	}
	client, err := apiextensions.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	return c.poll(ctx, time.Minute, "Volcano CRDs Established", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	}, c.apisv)
}
