package certs

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a config or bundle, at a field path such
// as "machine.ca.key" or "contexts.prod.endpoints[1]".
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}

	return p.Path + ": " + p.Message
}

// ValidationError lists every problem found in one document, so the operator
// can fix them all in one pass.
type ValidationError struct {
	// What names the document, usually its file path.
	What     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder

	fmt.Fprintf(&b, "certs: %s: %d problem", e.What, len(e.Problems))

	if len(e.Problems) != 1 {
		b.WriteString("s")
	}

	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}

	return b.String()
}

// problems collects Problems while a document is checked.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// addErr records err at path unless it is nil.
func (ps *problems) addErr(path string, err error) {
	if err != nil {
		ps.add(path, "%s", strings.TrimPrefix(err.Error(), "ca: "))
	}
}

func (ps problems) err(what string) error {
	if len(ps) == 0 {
		return nil
	}

	return &ValidationError{What: what, Problems: ps}
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
