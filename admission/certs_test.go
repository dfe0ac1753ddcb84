package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestSelfSignedIssuesRenewsAndKeepsBundles: the first sync issues a
// certificate for the Service's names and writes its CA into both webhook
// configurations; a second replica serves the same one; with a third of
// its validity left it is replaced by one from a new CA, and the bundle
// trusts both until the next renewal.
func TestSelfSignedIssuesRenewsAndKeepsBundles(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.vshare.io"}, {Name: "b.vshare.io"}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "c.vshare.io"}}},
	)
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	replica := func() *SelfSigned {
		return &SelfSigned{Client: client, Namespace: "vs", Secret: "tls", DNSNames: []string{"wh.vs.svc"},
			Mutating: "m", Validating: "v", Validity: 90 * 24 * time.Hour, Now: func() time.Time { return now }}
	}
	a, b := replica(), replica()
	renew, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(60*24*time.Hour - time.Minute); !renew.Equal(want) {
		t.Errorf("renewal at %v, want %v (a third of 90 days before the end)", renew, want)
	}
	if _, err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca, cb := leafOf(t, a), leafOf(t, b)
	if !ca.Equal(cb) {
		t.Error("two replicas serve different certificates")
	}
	bundles := func() [][]byte {
		m, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "m", metav1.GetOptions{})
		v, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "v", metav1.GetOptions{})
		return [][]byte{m.Webhooks[0].ClientConfig.CABundle, m.Webhooks[1].ClientConfig.CABundle, v.Webhooks[0].ClientConfig.CABundle}
	}
	trusted := func(leaf *x509.Certificate) bool {
		for _, bundle := range bundles() {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(bundle) {
				return false
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "wh.vs.svc", Roots: pool, CurrentTime: now}); err != nil {
				return false
			}
		}
		return true
	}
	if !trusted(ca) {
		t.Fatal("the webhook configurations' bundles do not verify the served certificate")
	}

	now = now.Add(61 * 24 * time.Hour)
	if _, err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := leafOf(t, a)
	if renewed.Equal(ca) {
		t.Fatal("not renewed with a third of its validity left")
	}
	if !trusted(renewed) || !trusted(ca) {
		t.Error("after renewal the bundles must trust the new certificate and the one other replicas still serve")
	}
	if _, err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !leafOf(t, b).Equal(renewed) {
		t.Error("the other replica did not pick up the renewed certificate")
	}
}

func leafOf(t *testing.T, s *SelfSigned) *x509.Certificate {
	t.Helper()
	c, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}
