//go:build go1.24

// debug/elf's DynamicVersionNeeds arrived in Go 1.24; go.mod's go line is
// older (Volcano's), so this file says what it needs.

package images

import (
	"debug/elf"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// GLIBCFloor is the oldest glibc libvgpu.so must load with, and the glibc
// of the images' runtime layer: Debian bullseye's (debian.lock).
const GLIBCFloor = "2.31"

// CheckGLIBC returns an error naming the file, the library and the
// version when the ELF file at path needs a glibc symbol version newer than
// floor ("2.31"), or a glibc ABI marker (GLIBC_ABI_DT_RELR, glibc 2.36's
// packed relocations) that an older loader refuses. A file linked against
// the host's glibc 2.36 fails it as soon as it uses anything that changed
// since 2.31 (in 2.34 every pthread function moved into libc with a new
// version).
func CheckGLIBC(path, floor string) error {
	want, ok := glibcVersion("GLIBC_" + floor)
	if !ok {
		return fmt.Errorf("glibc floor %q: want a version like 2.31", floor)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("check glibc versions of %s: %w", path, err)
	}
	defer f.Close()
	needs, err := f.DynamicVersionNeeds()
	if err != nil {
		return fmt.Errorf("check glibc versions of %s: %w", path, err)
	}
	var above []string
	for _, n := range needs {
		for _, dep := range n.Needs {
			if !strings.HasPrefix(dep.Dep, "GLIBC_") {
				continue // GCC_*, CXXABI_*: not glibc's
			}
			v, ok := glibcVersion(dep.Dep)
			if !ok || versionLess(want, v) {
				above = append(above, n.Name+" "+dep.Dep)
			}
		}
	}
	if len(above) > 0 {
		return fmt.Errorf("%s needs %s, above the glibc floor %s: build it against the sysroot of debian.lock, not the host's glibc",
			path, strings.Join(above, ", "), floor)
	}
	return nil
}

// glibcVersion parses "GLIBC_2.31" (or "GLIBC_2.2.5") into its numbers;
// ok is false for markers such as GLIBC_PRIVATE or GLIBC_ABI_DT_RELR.
func glibcVersion(s string) ([]int, bool) {
	parts := strings.Split(strings.TrimPrefix(s, "GLIBC_"), ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// versionLess reports a < b, comparing number by number.
func versionLess(a, b []int) bool {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// libraryDirs are where the loader looks for a NEEDED library without an
// ld.so.cache: Debian's multiarch directories, then the traditional ones.
func libraryDirs() []string {
	return []string{"/lib/" + multiarch, "/usr/lib/" + multiarch, "/lib", "/usr/lib"}
}

// checkLinked checks that every dynamically linked ELF file of an image
// (all its layers' entries, by path) finds its program interpreter and
// every library it names as NEEDED inside the image. Libraries a program
// opens with dlopen (the driver's libcuda.so.1 and libnvidia-ml.so.1, which
// the NVIDIA container runtime mounts) are not NEEDED and not checked.
func checkLinked(files map[string]entry) error {
	for p, e := range files {
		if e.Src == "" || e.Dir || e.Link != "" {
			continue
		}
		f, err := elf.Open(e.Src)
		if err != nil {
			continue // not an ELF file
		}
		err = checkELFLinked(f, p, files)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func checkELFLinked(f *elf.File, p string, files map[string]entry) error {
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return fmt.Errorf("%s: read its interpreter: %w", p, err)
		}
		interp := strings.TrimRight(string(b), "\x00")
		if _, ok := resolve(files, interp); !ok {
			return fmt.Errorf("%s: its interpreter %s is not in the image", p, interp)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: read its NEEDED libraries: %w", p, err)
	}
	for _, lib := range libs {
		found := false
		for _, d := range libraryDirs() {
			if _, ok := resolve(files, d+"/"+lib); ok {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which is in none of %s in the image", p, lib, strings.Join(libraryDirs(), ", "))
		}
	}
	return nil
}

// resolve follows symbolic links among the image's entries to a regular
// file or directory.
func resolve(files map[string]entry, p string) (entry, bool) {
	for hops := 0; hops < 16; hops++ {
		e, ok := files[p]
		if !ok {
			return entry{}, false
		}
		if e.Link == "" {
			return e, true
		}
		if strings.HasPrefix(e.Link, "/") {
			p = path.Clean(e.Link)
		} else {
			p = path.Join(path.Dir(p), e.Link)
		}
	}
	return entry{}, false
}
