package images

import (
	"strings"
	"testing"
)

// TestDebianLockPinsBullseyeGLIBC: the lock parses, its libc6 is glibc
// GLIBCFloor, and libc6-dev (the headers) is the same build as libc6 (the
// runtime layer).
func TestDebianLockPinsBullseyeGLIBC(t *testing.T) {
	l, err := parseLock(debianLock)
	if err != nil {
		t.Fatal(err)
	}
	libc, ok := l.find("libc6")
	if !ok || !strings.HasPrefix(libc.Version, GLIBCFloor+"-") {
		t.Fatalf("libc6 %q, want glibc %s", libc.Version, GLIBCFloor)
	}
	for _, pkg := range []string{"libc6-dev", "linux-libc-dev"} {
		d, ok := l.find(pkg)
		if !ok {
			t.Fatalf("debian.lock has no %s", pkg)
		}
		if pkg == "libc6-dev" && d.Version != libc.Version {
			t.Errorf("libc6-dev %s, libc6 %s: want the same build", d.Version, libc.Version)
		}
	}
	if l.Mirror != "http://deb.debian.org" {
		t.Errorf("mirror %q, want http://deb.debian.org", l.Mirror)
	}
}

// TestParseLockRejects: a bad line is an error naming the line, the field
// and the value.
func TestParseLockRejects(t *testing.T) {
	const sum = "718e3ed8c92207caf5b541e7332affad4f62501cbab3f0cffbe9e6db0b89eae9"
	good := "deb libc6 2.31-13 debian pool/main/g/glibc/libc6_2.31-13_amd64.deb " + sum + " 10"
	for _, tc := range []struct {
		name, text, want string
	}{
		{name: "no mirror", text: good, want: "no mirror line"},
		{name: "no packages", text: "mirror http://m", want: "no packages"},
		{name: "mirror not a URL", text: "mirror ftp://m\n" + good, want: `line 1: mirror "ftp://m"`},
		{name: "path of another package", text: "mirror http://m\ndeb libc6 2.31-13 debian pool/main/g/glibc/libc6-dev_2.31-13_amd64.deb " + sum + " 10",
			want: `line 2: path "pool/main/g/glibc/libc6-dev_2.31-13_amd64.deb"`},
		{name: "absolute path", text: "mirror http://m\ndeb libc6 2.31-13 debian /libc6_2.31-13_amd64.deb " + sum + " 10", want: `path "/libc6_2.31-13_amd64.deb"`},
		{name: "short sha256", text: "mirror http://m\ndeb libc6 2.31-13 debian pool/libc6_2.31-13_amd64.deb abc 10", want: `sha256 "abc"`},
		{name: "bad size", text: "mirror http://m\ndeb libc6 2.31-13 debian pool/libc6_2.31-13_amd64.deb " + sum + " -1", want: `size "-1"`},
		{name: "twice", text: "mirror http://m\n" + good + "\n" + good, want: `line 3: package "libc6": listed twice`},
		{name: "unknown line", text: "mirror http://m\nrpm x", want: `line 2: "rpm x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseLock(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseLock = %v, want an error containing %s", err, tc.want)
			}
		})
	}
}
