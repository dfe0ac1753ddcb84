// Package allocsig signs device allocations in the scheduler and verifies
// them in the node agents, so that a pod whose allocation annotations were
// written by anyone but this project's scheduler gets no devices.
//
// Anyone allowed to create pods can set annotations and spec.nodeName, so
// the annotations alone do not prove that the scheduler chose the cards:
// a user could copy another pod's allocation, name another node's card, or
// bypass the scheduler. With a shared key (a Secret mounted into the
// scheduler and every agent) the scheduler adds
//
//	vshare.io/allocation-signature: v1;kid=<key id>;keys=<k1>,<k2>,...;mac=<base64url>
//
// where mac is HMAC-SHA256 over the pod's UID, the node, and the listed
// annotation keys with their values, each length-prefixed. The UID is
// assigned by the API server at creation, so a signature cannot be replayed
// onto another pod; the node binds it to one node; the listed annotations
// are those that do not change after bind (the agent consumes
// devices-to-allocate and moves bind-phase; those are not covered).
//
// A key file holds one key per line; the first signs, every line verifies,
// so keys rotate by adding the new key as a second line everywhere, then
// moving it first, then dropping the old one.
package allocsig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Annotation holds the signature.
const Annotation = "vshare.io/allocation-signature"

// MinKeyLen is the shortest key accepted, in bytes.
const MinKeyLen = 32

// maxKeys bounds the lines of a key file.
const maxKeys = 16

// maxSignatureLen bounds the annotation value a verifier parses.
const maxSignatureLen = 4096

const version = "v1"

// ErrInvalid marks a missing, malformed or wrong signature.
var ErrInvalid = errors.New("allocation signature refused")

// Keyring holds the keys of one key file. The zero value has no key.
type Keyring struct {
	keys [][]byte
	ids  []string
}

// Parse reads a key file's content: one key per non-empty line, surrounding
// blanks trimmed, each at least MinKeyLen bytes.
func Parse(data []byte) (*Keyring, error) {
	k := &Keyring{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) < MinKeyLen {
			return nil, fmt.Errorf("key on line %d is %d bytes: want at least %d", i+1, len(line), MinKeyLen)
		}
		if len(k.keys) == maxKeys {
			return nil, fmt.Errorf("more than %d keys", maxKeys)
		}
		key := bytes.Clone(line)
		k.keys = append(k.keys, key)
		k.ids = append(k.ids, keyID(key))
	}
	if len(k.keys) == 0 {
		return nil, errors.New("no key: want one key per line, the first signing")
	}
	return k, nil
}

// Load reads and parses a key file.
func Load(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("allocation key file: %w", err)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("allocation key file %s: %w", path, err)
	}
	return k, nil
}

// keyID names a key without revealing it: the first 8 hex digits of the
// SHA-256 of "vshare-key-id" and the key.
func keyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("vshare-key-id\x00"), key...))
	return hex.EncodeToString(sum[:4])
}

// mac computes the HMAC of the signed content.
func mac(key []byte, uid, node string, ann map[string]string, keys []string) []byte {
	h := hmac.New(sha256.New, key)
	var buf [20]byte
	field := func(s string) {
		h.Write(strconv.AppendInt(buf[:0], int64(len(s)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field(version)
	field(uid)
	field(node)
	for _, k := range keys {
		field(k)
		field(ann[k])
	}
	return h.Sum(nil)
}

// Sign returns the signature of the pod's allocation: its UID, the node and
// the annotations named by keys (sorted and deduplicated; keys absent from
// ann are skipped, so they are not claimed as covered).
func (k *Keyring) Sign(uid, node string, ann map[string]string, keys []string) string {
	covered := make([]string, 0, len(keys))
	for _, key := range keys {
		if _, ok := ann[key]; ok {
			covered = append(covered, key)
		}
	}
	slices.Sort(covered)
	covered = slices.Compact(covered)
	sum := mac(k.keys[0], uid, node, ann, covered)
	return version + ";kid=" + k.ids[0] + ";keys=" + strings.Join(covered, ",") + ";mac=" +
		base64.RawURLEncoding.EncodeToString(sum)
}

// Verify checks the signature in ann[Annotation] against the pod's UID, the
// node and the annotations, and that it covers every required key. The
// error names what is wrong and wraps ErrInvalid.
func (k *Keyring) Verify(uid, node string, ann map[string]string, required []string) error {
	sig, ok := ann[Annotation]
	if !ok {
		return fmt.Errorf("%s is missing: the allocation was not written by a scheduler holding the allocation key: %w", Annotation, ErrInvalid)
	}
	if len(sig) > maxSignatureLen {
		return fmt.Errorf("%s is %d bytes, more than %d: %w", Annotation, len(sig), maxSignatureLen, ErrInvalid)
	}
	fields := strings.Split(sig, ";")
	if len(fields) != 4 || fields[0] != version {
		return fmt.Errorf("%s=%q: want %s;kid=<id>;keys=<k1,...>;mac=<base64url>: %w", Annotation, sig, version, ErrInvalid)
	}
	kid, ok1 := strings.CutPrefix(fields[1], "kid=")
	list, ok2 := strings.CutPrefix(fields[2], "keys=")
	enc, ok3 := strings.CutPrefix(fields[3], "mac=")
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("%s=%q: want %s;kid=<id>;keys=<k1,...>;mac=<base64url>: %w", Annotation, sig, version, ErrInvalid)
	}
	var covered []string
	if list != "" {
		covered = strings.Split(list, ",")
	}
	if !slices.IsSorted(covered) || len(slices.Compact(slices.Clone(covered))) != len(covered) {
		return fmt.Errorf("%s: keys %q are not sorted and distinct: %w", Annotation, list, ErrInvalid)
	}
	for _, r := range required {
		if _, found := slices.BinarySearch(covered, r); !found {
			return fmt.Errorf("%s does not cover %s: %w", Annotation, r, ErrInvalid)
		}
	}
	got, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%s: mac %q is not a base64url SHA-256: %w", Annotation, enc, ErrInvalid)
	}
	i := slices.Index(k.ids, kid)
	if i < 0 {
		return fmt.Errorf("%s: signed with key %s, which is not in this node's key file (%s): %w",
			Annotation, kid, strings.Join(k.ids, ","), ErrInvalid)
	}
	for _, key := range covered {
		if _, ok := ann[key]; !ok {
			return fmt.Errorf("%s covers %s, which the pod does not have: %w", Annotation, key, ErrInvalid)
		}
	}
	if !hmac.Equal(got, mac(k.keys[i], uid, node, ann, covered)) {
		return fmt.Errorf("%s does not match the pod's UID, node and allocation: %w", Annotation, ErrInvalid)
	}
	return nil
}

// Covers reports whether the signature in ann[Annotation] names key among
// the annotations it covers. It does not check the signature: call it on
// annotations Verify accepted.
func Covers(ann map[string]string, key string) bool {
	sig, ok := ann[Annotation]
	if !ok {
		return false
	}
	for _, f := range strings.Split(sig, ";") {
		if list, ok := strings.CutPrefix(f, "keys="); ok {
			return slices.Contains(strings.Split(list, ","), key)
		}
	}
	return false
}

// IDs lists the key IDs, signing key first.
func (k *Keyring) IDs() []string { return slices.Clone(k.ids) }

// File is a key file read again when it changes (a mounted Secret is
// replaced by a symlink swap), at most once per interval. A file that
// turns unreadable or invalid keeps the last good keys in force and
// reports the error.
type File struct {
	path     string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	ring    *Keyring
	stamp   string
	checked time.Time
	lastErr error
}

// DefaultRecheck is how often a File looks for a changed key file.
const DefaultRecheck = 10 * time.Second

// OpenFile loads the key file; it must be valid now.
func OpenFile(path string) (*File, error) {
	f := &File{path: path, interval: DefaultRecheck, now: time.Now}
	ring, stamp, err := f.read()
	if err != nil {
		return nil, err
	}
	f.ring, f.stamp, f.checked = ring, stamp, f.now()
	return f, nil
}

func (f *File) read() (*Keyring, string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, "", fmt.Errorf("allocation key file: %w", err)
	}
	ring, err := Load(f.path)
	if err != nil {
		return nil, "", err
	}
	return ring, st.ModTime().String() + "/" + strconv.FormatInt(st.Size(), 10), nil
}

// Keys returns the keys in force and the error of the last reload attempt,
// if it failed (the returned keys are then the last good ones).
func (f *File) Keys() (*Keyring, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if now.Sub(f.checked) < f.interval {
		return f.ring, f.lastErr
	}
	f.checked = now
	st, err := os.Stat(f.path)
	if err == nil && st.ModTime().String()+"/"+strconv.FormatInt(st.Size(), 10) == f.stamp {
		f.lastErr = nil
		return f.ring, nil
	}
	ring, stamp, err := f.read()
	if err != nil {
		f.lastErr = err
		return f.ring, err
	}
	f.ring, f.stamp, f.lastErr = ring, stamp, nil
	return f.ring, nil
}
