package fakedriver_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// runImportHelper is the "import" helper: a process that opens the export
// $FAKEDRIVER_TEST_EXPORT (IMPORT), prints "ready", and on a line from
// stdin drops it (UNIMPORT) and prints "done"; it then waits for EOF.
func runImportHelper(do func(string) (string, error), stdin *bufio.Reader) error {
	id := os.Getenv(envExport)
	if resp, err := do("IMPORT " + id); err != nil || resp != fmt.Sprintf("OK 0 %d", gib) {
		return fmt.Errorf("IMPORT %s: %q, %v", id, resp, err)
	}
	fmt.Println("ready")
	if _, err := stdin.ReadString('\n'); err != nil {
		return nil
	}
	if resp, err := do("UNIMPORT " + id); err != nil || resp != "OK" {
		return fmt.Errorf("UNIMPORT %s: %q, %v", id, resp, err)
	}
	fmt.Println("done")
	exitOnEOF(stdin)
	return nil
}

// TestSharedMemoryOutlivesItsExporter: an exported allocation opened by
// another process stays on the device after its exporter frees it, charged
// to no process, until the importer lets go; an importer takes nothing.
func TestSharedMemoryOutlivesItsExporter(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	c.expect(t, "CTX 0 1", "OK")
	c.expect(t, "ALLOC 0 "+strconv.FormatUint(gib, 10), "OK")
	id := c.number(t, "EXPORT 0 "+strconv.FormatUint(gib, 10))
	ch := startChild(t, "import", dr.Path(), fmt.Sprint(envExport, "=", id))
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, gib)) // imported: nothing more taken

	c.expect(t, "UNEXPORT "+strconv.FormatUint(id, 10), "OK")
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, gib)) // the importer keeps it
	c.expect(t, "PROCS 0", fmt.Sprintf("OK 1 %d:0:1", os.Getpid()))
	c.expect(t, "ALLOC 0 "+strconv.FormatUint(3*gib+1, 10), "OOM")

	if _, err := fmt.Fprintln(ch.stdin, "go"); err != nil {
		t.Fatal(err)
	}
	if line, err := ch.out.ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("importer: %q, %v", line, err)
	}
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem))
}

// TestSharedMemoryGoesWithItsLastImporter: the importer's death is its
// last close; an export freed by its exporter goes with it.
func TestSharedMemoryGoesWithItsLastImporter(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	c.expect(t, "ALLOC 0 "+strconv.FormatUint(gib, 10), "OK")
	id := c.number(t, "EXPORT 0 "+strconv.FormatUint(gib, 10))
	ch := startChild(t, "import", dr.Path(), fmt.Sprint(envExport, "=", id))
	c.expect(t, "UNEXPORT "+strconv.FormatUint(id, 10), "OK")
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, gib))
	ch.kill()
	eventually(t, 5*time.Second, func() (bool, string) {
		resp := c.do(t, "MEM 0")
		return resp == fmt.Sprintf("OK %d 0", dev0Mem), "MEM 0 = " + resp
	})
	// The export is gone with it.
	c.expect(t, "IMPORT "+strconv.FormatUint(id, 10), "ERR no such export")
}

// TestSharedMemoryRequests: what the requests refuse.
func TestSharedMemoryRequests(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	c.expect(t, "EXPORT 0 1", "ERR free exceeds held")
	c.expect(t, "ALLOC 0 100", "OK")
	id := c.number(t, "EXPORT 0 60")
	c.expect(t, "EXPORT 0 60", "ERR free exceeds held") // 40 left unexported
	c.expect(t, "IMPORT 999", "ERR no such export")
	c.expect(t, "UNIMPORT "+strconv.FormatUint(id, 10), "ERR not imported by the caller")
	c.expect(t, "UNEXPORT 999", "ERR not exported by the caller")
	c.expect(t, "IMPORT", "ERR wrong number of fields")
	// Freed without importers: the exporter's memory goes as with FREE.
	c.expect(t, "UNEXPORT "+strconv.FormatUint(id, 10), "OK")
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 40", dev0Mem))
	c.expect(t, "FREE 0 40", "OK")
}

// TestSharedPoolPointerStaysInItsPool: a pool allocation exported
// (cuMemPoolExportPointer), imported, freed by the importer and then by its
// exporter, back into its pool (UNSHARE): its bytes stay the exporter's
// until the pool releases them (FREE). Against the reference's order, an
// exporter that unshares while an importer still holds it keeps nothing
// more for the importer.
func TestSharedPoolPointerStaysInItsPool(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	g := strconv.FormatUint(gib, 10)
	c.expect(t, "ALLOC 0 "+g, "OK")
	id := strconv.FormatUint(c.number(t, "EXPORT 0 "+g), 10)
	ch := startChild(t, "import", dr.Path(), envExport+"="+id)
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, gib))
	if _, err := fmt.Fprintln(ch.stdin, "go"); err != nil {
		t.Fatal(err)
	}
	if line, err := ch.out.ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("importer: %q, %v", line, err)
	}
	c.expect(t, "UNSHARE "+id, "OK")
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, gib)) // in the exporter's pool
	c.expect(t, "UNSHARE "+id, "ERR not exported by the caller")
	c.expect(t, "IMPORT "+id, "ERR no such export")
	c.expect(t, "FREE 0 "+g, "OK") // the pool releases it
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem))

	c.expect(t, "ALLOC 0 "+g, "OK")
	id = strconv.FormatUint(c.number(t, "EXPORT 0 "+g), 10)
	ch = startChild(t, "import", dr.Path(), envExport+"="+id)
	c.expect(t, "UNSHARE "+id, "OK") // the importer still holds it
	c.expect(t, "FREE 0 "+g, "OK")
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem))
	if _, err := fmt.Fprintln(ch.stdin, "go"); err != nil {
		t.Fatal(err)
	}
	if line, err := ch.out.ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("importer: %q, %v", line, err)
	}
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem)) // its drop frees nothing more
	c.expect(t, "UNSHARE 999", "ERR not exported by the caller")
}
