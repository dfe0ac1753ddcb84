package allocsig

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	keyA = "0123456789abcdef0123456789abcdef-A"
	keyB = "0123456789abcdef0123456789abcdef-B"
)

var signedKeys = []string{"volcano.sh/vgpu-ids-new", "volcano.sh/vgpu-node", "volcano.sh/bind-time"}

func ring(t *testing.T, lines ...string) *Keyring {
	t.Helper()
	k, err := Parse([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func allocation() map[string]string {
	return map[string]string{
		"volcano.sh/vgpu-ids-new":        "GPU-1,NVIDIA,4096,30:;",
		"volcano.sh/devices-to-allocate": "GPU-1,NVIDIA,4096,30:;",
		"volcano.sh/vgpu-node":           "node-1",
		"volcano.sh/bind-time":           "1700000000",
		"volcano.sh/bind-phase":          "allocating",
	}
}

func signed(k *Keyring, uid, node string) map[string]string {
	ann := allocation()
	ann[Annotation] = k.Sign(uid, node, ann, signedKeys)
	return ann
}

func TestSignVerify(t *testing.T) {
	k := ring(t, keyA)
	ann := signed(k, "uid-1", "node-1")
	if err := k.Verify("uid-1", "node-1", ann, signedKeys); err != nil {
		t.Fatalf("genuine signature refused: %v", err)
	}
	// The agent consumes devices-to-allocate and moves bind-phase: still valid.
	ann["volcano.sh/devices-to-allocate"] = ";"
	ann["volcano.sh/bind-phase"] = "success"
	if err := k.Verify("uid-1", "node-1", ann, signedKeys); err != nil {
		t.Fatalf("signature refused after the agent's own updates: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	k := ring(t, keyA)
	other := ring(t, keyB)
	cases := []struct {
		name      string
		uid, node string
		ann       func() map[string]string
		required  []string
		want      string
	}{
		{"missing", "uid-1", "node-1", allocation, signedKeys, "is missing"},
		{"other pod", "uid-2", "node-1", func() map[string]string { return signed(k, "uid-1", "node-1") }, signedKeys, "does not match"},
		{"other node", "uid-1", "node-2", func() map[string]string { return signed(k, "uid-1", "node-1") }, signedKeys, "does not match"},
		{"other key", "uid-1", "node-1", func() map[string]string { return signed(other, "uid-1", "node-1") }, signedKeys, "not in this node's key file"},
		{"cards changed", "uid-1", "node-1", func() map[string]string {
			a := signed(k, "uid-1", "node-1")
			a["volcano.sh/vgpu-ids-new"] = "GPU-2,NVIDIA,4096,30:;"
			return a
		}, signedKeys, "does not match"},
		{"bind-time changed", "uid-1", "node-1", func() map[string]string {
			a := signed(k, "uid-1", "node-1")
			a["volcano.sh/bind-time"] = "1700000001"
			return a
		}, signedKeys, "does not match"},
		{"covered key dropped", "uid-1", "node-1", func() map[string]string {
			a := signed(k, "uid-1", "node-1")
			delete(a, "volcano.sh/bind-time")
			return a
		}, []string{"volcano.sh/vgpu-ids-new"}, "which the pod does not have"},
		{"required key not covered", "uid-1", "node-1", func() map[string]string {
			a := allocation()
			a[Annotation] = k.Sign("uid-1", "node-1", a, []string{"volcano.sh/vgpu-node"})
			return a
		}, signedKeys, "does not cover volcano.sh/vgpu-ids-new"},
		{"garbage", "uid-1", "node-1", func() map[string]string {
			a := allocation()
			a[Annotation] = "hello"
			return a
		}, signedKeys, "want v1;kid="},
		{"bad mac", "uid-1", "node-1", func() map[string]string {
			a := signed(k, "uid-1", "node-1")
			a[Annotation] = a[Annotation][:strings.Index(a[Annotation], "mac=")] + "mac=!!"
			return a
		}, signedKeys, "not a base64url SHA-256"},
		{"unsorted keys", "uid-1", "node-1", func() map[string]string {
			a := signed(k, "uid-1", "node-1")
			a[Annotation] = strings.Replace(a[Annotation], "keys=", "keys=zz,", 1)
			return a
		}, signedKeys, "not sorted and distinct"},
		{"oversized", "uid-1", "node-1", func() map[string]string {
			a := allocation()
			a[Annotation] = strings.Repeat("x", maxSignatureLen+1)
			return a
		}, signedKeys, "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k.Verify(tc.uid, tc.node, tc.ann(), tc.required)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want an ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// A signature is bound to its fields by length-prefixing: moving bytes
// between the UID and the node does not keep it valid.
func TestFieldBoundaries(t *testing.T) {
	k := ring(t, keyA)
	ann := allocation()
	ann[Annotation] = k.Sign("ab", "c", ann, signedKeys)
	if err := k.Verify("a", "bc", ann, signedKeys); err == nil {
		t.Fatal("a signature for uid=ab node=c verified for uid=a node=bc")
	}
}

func TestRotation(t *testing.T) {
	old := ring(t, keyA)
	both := ring(t, keyB, keyA)
	ann := signed(old, "uid-1", "node-1")
	if err := both.Verify("uid-1", "node-1", ann, signedKeys); err != nil {
		t.Fatalf("a ring holding the old key as its second line refused the old signature: %v", err)
	}
	ann = signed(both, "uid-1", "node-1")
	if !strings.Contains(ann[Annotation], "kid="+both.IDs()[0]) {
		t.Fatalf("signature %q not made with the first key %s", ann[Annotation], both.IDs()[0])
	}
	if err := old.Verify("uid-1", "node-1", ann, signedKeys); err == nil {
		t.Fatal("a ring without the new key accepted its signature")
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no key"},
		{"\n  \n", "no key"},
		{"short", "line 1 is 5 bytes: want at least 32"},
		{keyA + "\nshort", "line 2 is 5 bytes"},
		{strings.Repeat(keyA+"\n", maxKeys+1), "more than 16 keys"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%.20q) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
	k := ring(t, "  "+keyA+"  ", "", keyB+"\r")
	if len(k.IDs()) != 2 || k.IDs()[0] == k.IDs()[1] {
		t.Fatalf("IDs = %v, want two distinct", k.IDs())
	}
	if strings.Contains(k.IDs()[0], "0123") {
		t.Fatalf("key ID %s reveals the key", k.IDs()[0])
	}
}

func TestFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocation.key")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o400); err != nil {
			_ = os.Chmod(path, 0o600)
			if err := os.WriteFile(path, []byte(s), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	write(keyA, base)
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	f.now = func() time.Time { return clock }
	k, err := f.Keys()
	if err != nil || k.IDs()[0] != ring(t, keyA).IDs()[0] {
		t.Fatalf("Keys = %v, %v; want key A", k, err)
	}
	write(keyB+"\n"+keyA, base.Add(time.Minute))
	if k, _ := f.Keys(); k.IDs()[0] != ring(t, keyA).IDs()[0] {
		t.Fatal("key file re-read before the recheck interval")
	}
	clock = clock.Add(DefaultRecheck)
	if k, err := f.Keys(); err != nil || !maps.Equal(map[string]bool{k.IDs()[0]: true}, map[string]bool{ring(t, keyB).IDs()[0]: true}) {
		t.Fatalf("after rotation Keys = %v, %v; want key B first", k.IDs(), err)
	}
	write("short", base.Add(2*time.Minute))
	clock = clock.Add(DefaultRecheck)
	k, err = f.Keys()
	if err == nil || !strings.Contains(err.Error(), "want at least 32") {
		t.Fatalf("invalid key file: err = %v, want the parse error", err)
	}
	if k.IDs()[0] != ring(t, keyB).IDs()[0] {
		t.Fatal("an invalid key file replaced the last good keys")
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("OpenFile of an absent file succeeded")
	}
}

func FuzzVerify(f *testing.F) {
	k, err := Parse([]byte(keyA))
	if err != nil {
		f.Fatal(err)
	}
	good := allocation()
	f.Add(k.Sign("uid-1", "node-1", good, signedKeys), "uid-1", "node-1")
	f.Add("v1;kid=00000000;keys=;mac=", "", "")
	f.Add("v1;kid=;keys=a,b,a;mac=AAAA", "u", "n")
	f.Fuzz(func(t *testing.T, sig, uid, node string) {
		ann := allocation()
		ann[Annotation] = sig
		err := k.Verify(uid, node, ann, signedKeys)
		if err == nil && sig != k.Sign(uid, node, ann, signedKeys) {
			t.Fatalf("accepted %q for uid %q node %q, which is not the signature", sig, uid, node)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
	})
}

// Covers names exactly the keys the signature lists: those the scheduler
// passed and the pod has, not a key that only prefixes or extends one.
func TestCovers(t *testing.T) {
	k := ring(t, keyA)
	ann := signed(k, "uid-1", "node-1")
	for key, want := range map[string]bool{
		"volcano.sh/vgpu-node":           true,
		"volcano.sh/bind-time":           true,
		"volcano.sh/devices-to-allocate": false, // on the pod, not signed
		"volcano.sh/vgpu":                false,
		"volcano.sh/vgpu-node-x":         false,
		"":                               false,
	} {
		if got := Covers(ann, key); got != want {
			t.Errorf("Covers(%q) = %v, want %v", key, got, want)
		}
	}
	ann["vshare.io/absent"] = ""
	delete(ann, "vshare.io/absent")
	ann[Annotation] = k.Sign("uid-1", "node-1", ann, append(signedKeys, "vshare.io/absent"))
	if Covers(ann, "vshare.io/absent") {
		t.Error("Covers names a key the pod did not have when signed")
	}
	if Covers(allocation(), "volcano.sh/vgpu-node") {
		t.Error("Covers without a signature: true")
	}
}
