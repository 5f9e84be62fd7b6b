package isolationcheck

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Result is what a probe concluded.
type Result string

const (
	// Held means the sandbox's code could not do what the probe tried.
	Held Result = "held"
	// Escaped means it could.
	Escaped Result = "ESCAPED"
	// Note means nothing was expected either way (the template allows it, or
	// the runtime decides it); the observation is reported all the same.
	Note Result = "note"
	// NotRun means the probe could not be run; the check fails, for nothing
	// was proven.
	NotRun Result = "NOT RUN"
)

// Row is one probe's line of the report.
type Row struct {
	Probe    string `json:"probe"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Result   Result `json:"result"`
	// Fix says what to change when the result is Escaped or NotRun.
	Fix string `json:"fix,omitempty"`
}

// Report is the check's outcome.
type Report struct {
	Template string `json:"template"`
	// Pool is the warm pool the sandboxes were claimed from, if any.
	Pool      string   `json:"pool,omitempty"`
	Runtime   string   `json:"runtime"`
	Sandboxes []string `json:"sandboxes"`
	Rows      []Row    `json:"rows"`
}

// Print writes the report as a table, then one line of what to fix for
// each row that failed, and a summary.
func (r *Report) Print(w io.Writer) error {
	source := "template " + r.Template
	if r.Pool != "" {
		source = fmt.Sprintf("warm pool %s (template %s)", r.Pool, r.Template)
	}
	fmt.Fprintf(w, "isolation of %s, %s, from inside sandboxes %v:\n\n", source, r.Runtime, r.Sandboxes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tEXPECTED\tOBSERVED\tRESULT")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Probe, row.Expected, row.Observed, row.Result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// One line per fix, naming every probe it answers.
	var fixes []string
	probes := map[string][]string{}
	for _, row := range r.Rows {
		if row.Result != Escaped && row.Result != NotRun {
			continue
		}
		if _, seen := probes[row.Fix]; !seen {
			fixes = append(fixes, row.Fix)
		}
		probes[row.Fix] = append(probes[row.Fix], row.Probe)
	}
	if len(fixes) > 0 {
		fmt.Fprintln(w, "\nwhat to fix:")
		for _, fix := range fixes {
			fmt.Fprintf(w, "- %s: %s\n", strings.Join(probes[fix], "; "), fix)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d of %d probes held, %d escaped, %d could not run, %d notes\n",
		r.count(Held), len(r.Rows), r.count(Escaped), r.count(NotRun), r.count(Note))
	return err
}

// Failed counts the rows that escaped or could not be run.
func (r *Report) Failed() int { return r.count(Escaped) + r.count(NotRun) }

func (r *Report) count(result Result) int {
	n := 0
	for _, row := range r.Rows {
		if row.Result == result {
			n++
		}
	}
	return n
}
