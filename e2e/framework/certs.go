//go:build e2e

package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServiceCIDR is the cluster's Service range; KubernetesServiceIP, its first
// address, is the kubernetes Service in-cluster clients dial.
const (
	ServiceCIDR         = "10.96.0.0/16"
	KubernetesServiceIP = "10.96.0.1"
)

// servingCert is a certificate and its key, as PEM files.
type servingCert struct{ Cert, Key string }

// clusterCA is the cluster CA's certificate in certs: what the
// controller-manager publishes as kube-root-ca.crt, so pods trust the API
// server.
func clusterCA(certs string) string { return filepath.Join(certs, "ca.crt") }

// writeClusterCerts makes the cluster CA (ca.crt, ca.key) and, signed by
// it, the API server's serving certificate for ip, loopback, the
// kubernetes Service's address and its DNS names, as kubeadm issues it.
func writeClusterCerts(certs, ip string) (servingCert, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, fmt.Errorf("cluster CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "vshare-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return servingCert{}, fmt.Errorf("cluster CA certificate: %w", err)
	}
	if err := writePEM(filepath.Join(certs, "ca.crt"), "CERTIFICATE", caDER, 0o644); err != nil {
		return servingCert{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, fmt.Errorf("serving key: %w", err)
	}
	ips := []net.IP{net.ParseIP(ip), net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)}
	if ips[0] == nil {
		return servingCert{}, fmt.Errorf("node address %q is not an IP address", ip)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return servingCert{}, fmt.Errorf("serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return servingCert{}, fmt.Errorf("serving key: %w", err)
	}
	out := servingCert{Cert: filepath.Join(certs, "apiserver-serving.crt"), Key: filepath.Join(certs, "apiserver-serving.key")}
	if err := writePEM(out.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return servingCert{}, err
	}
	if err := writePEM(out.Key, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return servingCert{}, err
	}
	return out, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
