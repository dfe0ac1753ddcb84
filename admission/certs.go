package admission

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Keys of the certificate Secret (those of a kubernetes.io/tls Secret, and
// cert-manager's ca.crt).
const (
	keyCert = v1.TLSCertKey
	keyKey  = v1.TLSPrivateKeyKey
	keyCA   = "ca.crt"
)

// CertSource gives the serving certificate to the TLS server.
type CertSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// SelfSigned keeps the webhook's serving certificate in a Secret, issued by
// a CA of its own that it also keeps there, and the webhook configurations'
// caBundle in step with it. Every replica runs one; they agree through the
// Secret (its resourceVersion: a replica that loses a race reads the
// winner's certificate). A certificate is replaced when a third of its
// validity is left, by one signed by a new CA; the bundle then carries the
// new CA and the one before it, so replicas still serving the old
// certificate keep being trusted until they reload it (each reloads at its
// next check).
type SelfSigned struct {
	Client kubernetes.Interface
	// Namespace and Secret name the Secret.
	Namespace, Secret string
	// DNSNames are the names the API server reaches the webhook by
	// (<service>.<namespace>.svc).
	DNSNames []string
	// Mutating and Validating name the webhook configurations whose
	// caBundle is kept; empty ones are skipped.
	Mutating, Validating string
	// Validity of a certificate; zero means one year.
	Validity time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	cur atomic.Pointer[tls.Certificate]
	mu  sync.Mutex
}

// GetCertificate implements CertSource.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := s.cur.Load()
	if c == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return c, nil
}

func (s *SelfSigned) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SelfSigned) validity() time.Duration {
	if s.Validity > 0 {
		return s.Validity
	}
	return 365 * 24 * time.Hour
}

// Sync makes sure the Secret holds a certificate with more than a third of
// its validity left (issuing one if not), serves it, and writes the CA
// bundle into the webhook configurations. It returns when the certificate
// expires next needs renewing.
func (s *SelfSigned) Sync(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secrets := s.Client.CoreV1().Secrets(s.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		sec, err := secrets.Get(ctx, s.Secret, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("read Secret %s/%s: %w", s.Namespace, s.Secret, err)
		}
		exists := err == nil
		if exists {
			if cert, renew, ok := s.usable(sec); ok {
				// The bundle first: the API server must trust a new
				// certificate before it is served.
				if err := s.patchBundles(ctx, sec.Data[keyCA]); err != nil {
					return time.Time{}, err
				}
				s.cur.Store(cert)
				return renew, nil
			}
		} else {
			sec = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Secret, Namespace: s.Namespace}, Type: v1.SecretTypeTLS}
		}
		var oldCA []byte
		if exists {
			oldCA = firstPEM(sec.Data[keyCA])
		}
		data, err := s.issue(oldCA)
		if err != nil {
			return time.Time{}, err
		}
		next := sec.DeepCopy()
		next.Data = data
		if exists {
			_, err = secrets.Update(ctx, next, metav1.UpdateOptions{})
		} else {
			_, err = secrets.Create(ctx, next, metav1.CreateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another replica wrote one: read it
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("write Secret %s/%s: %w", s.Namespace, s.Secret, err)
		}
		klog.InfoS("Issued a new webhook serving certificate", "secret", s.Namespace+"/"+s.Secret, "dnsNames", s.DNSNames, "validity", s.validity())
	}
	return time.Time{}, fmt.Errorf("secret %s/%s: too many concurrent writers", s.Namespace, s.Secret)
}

// usable parses the Secret's certificate and says whether it can serve: it
// matches its key, names our DNS names, chains to the bundle, and has more
// than a third of its validity left.
func (s *SelfSigned) usable(sec *v1.Secret) (*tls.Certificate, time.Time, bool) {
	cert, err := tls.X509KeyPair(sec.Data[keyCert], sec.Data[keyKey])
	if err != nil {
		return nil, time.Time{}, false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, time.Time{}, false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data[keyCA]) {
		return nil, time.Time{}, false
	}
	for _, name := range s.DNSNames {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: s.now()}); err != nil {
			return nil, time.Time{}, false
		}
	}
	renew := leaf.NotAfter.Add(-leaf.NotAfter.Sub(leaf.NotBefore) / 3)
	if !s.now().Before(renew) {
		return nil, time.Time{}, false
	}
	cert.Leaf = leaf
	return &cert, renew, true
}

// issue makes a CA and a serving certificate it signs; the bundle is the
// new CA followed by oldCA (the previous one), if any.
func (s *SelfSigned) issue(oldCA []byte) (map[string][]byte, error) {
	now := s.now().Add(-time.Minute) // clock skew between replicas and the API server
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "vshare-webhook-ca"},
		NotBefore: now, NotAfter: now.Add(s.validity() + time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: s.DNSNames[0]}, DNSNames: s.DNSNames,
		NotBefore: now, NotAfter: now.Add(s.validity()),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	bundle = append(bundle, oldCA...)
	return map[string][]byte{
		keyCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		keyCA:   bundle,
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// firstPEM is the first PEM block of b, re-encoded (the bundle's newest CA).
func firstPEM(b []byte) []byte {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil
	}
	return pem.EncodeToMemory(block)
}

// patchBundles writes bundle into every webhook of the two configurations
// that does not have it yet.
func (s *SelfSigned) patchBundles(ctx context.Context, bundle []byte) error {
	if s.Mutating != "" {
		mutating := s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
		c, err := mutating.Get(ctx, s.Mutating, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read MutatingWebhookConfiguration %s: %w", s.Mutating, err)
		}
		changed := false
		for i := range c.Webhooks {
			if !bytes.Equal(c.Webhooks[i].ClientConfig.CABundle, bundle) {
				c.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
			}
		}
		if changed {
			if _, err := mutating.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("write the CA bundle into MutatingWebhookConfiguration %s: %w", s.Mutating, err)
			}
		}
	}
	if s.Validating != "" {
		validating := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		c, err := validating.Get(ctx, s.Validating, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", s.Validating, err)
		}
		changed := false
		for i := range c.Webhooks {
			if !bytes.Equal(c.Webhooks[i].ClientConfig.CABundle, bundle) {
				c.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
			}
		}
		if changed {
			if _, err := validating.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("write the CA bundle into ValidatingWebhookConfiguration %s: %w", s.Validating, err)
			}
		}
	}
	return nil
}

// Run syncs until ctx ends: at the renewal time, and every interval in
// between, so a replica picks up a certificate another one issued and a
// caBundle an upgrade reset. Errors are logged and retried at the next
// interval; the current certificate keeps serving.
func (s *SelfSigned) Run(ctx context.Context, interval time.Duration) {
	for {
		wait := interval
		if renew, err := s.Sync(ctx); err != nil {
			klog.ErrorS(err, "Cannot sync the webhook certificate; retrying", "in", interval)
		} else if d := renew.Sub(s.now()); d < wait {
			wait = max(d, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Files serves a certificate and key from files (cert-manager's Secret
// mounted in the pod) and reloads them when they change on disk.
type Files struct {
	CertFile, KeyFile string

	mu    sync.Mutex
	cur   *tls.Certificate
	mtime time.Time
}

// GetCertificate implements CertSource: it rereads the files when their
// modification time changed (the kubelet swaps a Secret volume's files
// atomically).
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.CertFile)
	if err != nil {
		if f.cur != nil {
			return f.cur, nil
		}
		return nil, err
	}
	if f.cur != nil && st.ModTime().Equal(f.mtime) {
		return f.cur, nil
	}
	c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		if f.cur != nil {
			klog.ErrorS(err, "Cannot reload the serving certificate; keeping the current one")
			return f.cur, nil
		}
		return nil, err
	}
	f.cur, f.mtime = &c, st.ModTime()
	return f.cur, nil
}
