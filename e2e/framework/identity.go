//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccountKubeconfig asks the API server for a token of the
// ServiceAccount namespace/name (TokenRequest, one hour) and writes a
// kubeconfig using it into the work directory, so a component under test
// makes its requests as that ServiceAccount, with the RBAC it is bound to,
// as it would in a pod.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	hour := int64(3600)
	tr, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	path := filepath.Join(c.WorkDir, fmt.Sprintf("kubeconfig-%s-%s", namespace, name))
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: %[3]s
  user:
    token: %[2]s
contexts:
- name: e2e
  context: {cluster: e2e, user: %[3]s}
current-context: e2e
`, c.apiPort, tr.Status.Token, name)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// ServiceAccountUser is the user name the API server gives a
// ServiceAccount's requests (in the audit log and to RBAC).
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// StartDetached starts one of the harness's binaries (BinScheduler,
// BinDevicePlugin...) with its log in the cluster's log directory, outside
// the harness's own children: the caller stops it (Process.Stop), and
// Cluster.Poll does not treat its exit as a failure. It still dies with the
// test process.
func (c *Cluster) StartDetached(name, bin string, args, env []string) (*Process, error) {
	return startProcess(c.LogDir(), name, c.bins.Path(bin), args, env)
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause stops the process (SIGSTOP to its group) until Resume: a node
// agent that is alive but slow, for tests that need a request to find it
// busy.
func (p *Process) Pause() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT) }
