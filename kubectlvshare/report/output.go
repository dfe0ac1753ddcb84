package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"sigs.k8s.io/yaml"
)

// Output formats.
const (
	FormatTable = "table"
	FormatWide  = "wide"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// ValidFormat reports whether f is one of the output formats.
func ValidFormat(f string) bool {
	switch f {
	case FormatTable, FormatWide, FormatJSON, FormatYAML:
		return true
	}
	return false
}

// Tabler renders a report as a table (wide adds columns and unfolds);
// every report type of this package is one.
type Tabler interface {
	table(w io.Writer, wide bool) error
}

// Render writes the report in the format.
func Render(w io.Writer, format string, rep Tabler) error {
	switch format {
	case FormatJSON:
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("render JSON: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case FormatYAML:
		b, err := yaml.Marshal(rep)
		if err != nil {
			return fmt.Errorf("render YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	default:
		return rep.table(w, format == FormatWide)
	}
}

func itoa(v int) string       { return strconv.Itoa(v) }
func i64(v int64) string      { return strconv.FormatInt(v, 10) }
func ratio(a, b int64) string { return i64(a) + "/" + i64(b) }

// plural renders "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return itoa(n) + " " + noun + "s"
}

// dash renders "" as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notes numbers long messages that table cells refer to as "[n]".
type notes struct{ msgs []string }

// ref records msg and returns its reference.
func (n *notes) ref(msg string) string {
	n.msgs = append(n.msgs, msg)
	return "[" + itoa(len(n.msgs)) + "]"
}

// write prints the notes after a table.
func (n *notes) write(w io.Writer) error {
	if len(n.msgs) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	for i, m := range n.msgs {
		if _, err := fmt.Fprintf(w, "[%d] %s\n", i+1, m); err != nil {
			return err
		}
	}
	return nil
}
