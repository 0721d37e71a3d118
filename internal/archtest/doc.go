// Package archtest checks the rules docs/architecture.md states against the
// code: the import layers and their named exceptions, the functions where
// errors become gRPC codes, log keys only from internal/logkey, and the
// Clock, Rand and Logger defaults only through internal/defaults. The
// document is the single source: the checks read their rules from it, so
// a new layer, exception or mapping function is a change of the document
// alone.
package archtest

import (
	"fmt"
	"regexp"
	"strings"
)

// Rules is what the document states.
type Rules struct {
	// Layers are the import table's rows, lowest first.
	Layers []Layer
	// Exceptions are the imports a layer forbids that are allowed by name.
	Exceptions []Exception
	// Narrower are rules on one package's imports beyond its layer's.
	Narrower []Narrower
	// StatusFuncs are the functions where gRPC statuses may be made: the
	// mapping table's and the named allow-list's.
	StatusFuncs []FuncRef
}

// Layer is one row of the import table.
type Layer struct {
	Name string
	// Patterns name the layer's packages: "p" is p itself, "p/*" every
	// package below p. A package is in the layer of its most specific
	// pattern; p and p/* make up one component, p.
	Patterns []string
	// Layers are the lower layers its packages may import, Packages the
	// single packages (patterns) they may import besides.
	Layers   []string
	Packages []string
	// Own: its packages may import the other parts of their own
	// component; Anything: they may import any package.
	Own, Anything bool
}

// Exception allows imports from the packages From matches of the packages
// To matches, whatever the layers say.
type Exception struct {
	From, To []string
	Line     int
}

// Narrower restricts one package's imports of the module's packages: to
// the patterns listed (Only) or away from them.
type Narrower struct {
	Pkg      string
	Only     bool
	Patterns []string
	Line     int
}

// FuncRef names a function (or a package-level variable) in a file, by its
// path from the module root.
type FuncRef struct {
	File, Func string
}

const (
	importsHeader = "| layer | packages | may import |"
	statusHeader  = "| server | function | internal answer |"

	exceptionsHeading = "### named exceptions"
	narrowerHeading   = "### narrower rules"
	allowHeading      = "### statuses made elsewhere"
)

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	listSep    = regexp.MustCompile(`,|\band\b`)
)

// ParseDoc reads the rules from the document's text.
func ParseDoc(text string) (*Rules, error) {
	lines := strings.Split(text, "\n")
	r := &Rules{}

	for _, step := range []func([]string) error{r.parseLayers, r.parseStatusTable, r.parseLists} {
		if err := step(lines); err != nil {
			return nil, err
		}
	}

	switch {
	case len(r.Layers) == 0:
		return nil, fmt.Errorf("no import table (a table with the header %q)", importsHeader)
	case len(r.StatusFuncs) == 0:
		return nil, fmt.Errorf("no table of gRPC status functions (a table with the header %q)", statusHeader)
	}

	return r, nil
}

// tableRows returns the cells of the rows of the table whose header, in
// lower case and with single spaces, is header, with their line numbers.
func tableRows(lines []string, header string) (rows [][]string, at []int) {
	for i, l := range lines {
		if strings.ToLower(strings.Join(strings.Fields(l), " ")) != header {
			continue
		}

		for j := i + 2; j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|"); j++ {
			cells := strings.Split(strings.Trim(strings.TrimSpace(lines[j]), "|"), "|")
			for k := range cells {
				cells[k] = strings.TrimSpace(cells[k])
			}

			rows, at = append(rows, cells), append(at, j+1)
		}

		return rows, at
	}

	return nil, nil
}

func (r *Rules) parseLayers(lines []string) error {
	rows, at := tableRows(lines, importsHeader)

	for i, cells := range rows {
		if len(cells) != 3 {
			return fmt.Errorf("line %d: an import table row has 3 cells (layer, packages, may import), not %d", at[i], len(cells))
		}

		l := Layer{Name: strings.ToLower(strings.TrimSpace(withoutParens(cells[0]))), Patterns: names(cells[1])}

		switch {
		case len(l.Patterns) == 0:
			return fmt.Errorf("line %d: layer %q names no package", at[i], l.Name)
		case r.layer(l.Name) != nil:
			return fmt.Errorf("line %d: a second layer %q", at[i], l.Name)
		}

		if err := r.parseMayImport(&l, cells[2]); err != nil {
			return fmt.Errorf("line %d: layer %q: %w", at[i], l.Name, err)
		}

		r.Layers = append(r.Layers, l)
	}

	return nil
}

// parseMayImport reads a "may import" cell: comma-separated lower layers,
// `packages`, "its own component" or "anything"; parentheses are comments.
func (r *Rules) parseMayImport(l *Layer, cell string) error {
	for _, item := range listSep.Split(withoutParens(cell), -1) {
		item = strings.TrimSpace(item)

		switch m := backticked.FindStringSubmatch(item); {
		case item == "":
		case m != nil:
			l.Packages = append(l.Packages, m[1])
		case item == "anything":
			l.Anything = true
		case item == "its own component":
			l.Own = true
		case r.layer(item) != nil:
			l.Layers = append(l.Layers, item)
		case item == l.Name:
			l.Layers = append(l.Layers, item) // each other
		default:
			return fmt.Errorf("%q in may import is no layer above this row, no `package`, not \"its own component\" nor \"anything\"", item)
		}
	}

	return nil
}

func (r *Rules) layer(name string) *Layer {
	for i := range r.Layers {
		if r.Layers[i].Name == name {
			return &r.Layers[i]
		}
	}

	return nil
}

func (r *Rules) parseStatusTable(lines []string) error {
	rows, at := tableRows(lines, statusHeader)

	for i, cells := range rows {
		if len(cells) != 3 {
			return fmt.Errorf("line %d: a status table row has 3 cells, not %d", at[i], len(cells))
		}

		refs, err := funcRefs(cells[1])
		if err != nil {
			return fmt.Errorf("line %d: %w", at[i], err)
		}

		r.StatusFuncs = append(r.StatusFuncs, refs...)
	}

	return nil
}

// funcRefs reads "`file.go` `F`, `G` (comment)": each file followed by the
// functions in it. Text without backticks, and parentheses, are comments.
func funcRefs(cell string) ([]FuncRef, error) {
	var (
		refs  []FuncRef
		file  string
		named bool
	)

	for _, m := range backticked.FindAllStringSubmatch(withoutParens(cell), -1) {
		switch {
		case strings.HasSuffix(m[1], ".go"):
			if file != "" && !named {
				return nil, fmt.Errorf("%s names no function", file)
			}

			file, named = m[1], false
		case file == "":
			return nil, fmt.Errorf("function %s before any `file.go`", m[1])
		default:
			refs, named = append(refs, FuncRef{File: file, Func: m[1]}), true
		}
	}

	if file != "" && !named {
		return nil, fmt.Errorf("%s names no function", file)
	}

	return refs, nil
}

// parseLists reads the bullet lists under the exceptions, narrower rules
// and allow-list headings.
func (r *Rules) parseLists(lines []string) error {
	section := ""

	for i, l := range lines {
		if strings.HasPrefix(l, "#") {
			section = strings.ToLower(strings.TrimSpace(l))

			continue
		}

		if !strings.HasPrefix(l, "- `") {
			continue
		}

		var err error

		switch section {
		case exceptionsHeading:
			err = r.parseException(l, i+1)
		case narrowerHeading:
			err = r.parseNarrower(l, i+1)
		case allowHeading:
			var refs []FuncRef
			head, _, _ := strings.Cut(l, ": ")
			refs, err = funcRefs(head)
			r.StatusFuncs = append(r.StatusFuncs, refs...)
		}

		if err != nil {
			return fmt.Errorf("line %d: %w", i+1, err)
		}
	}

	return nil
}

// parseException reads "- `a`, `b` → `c`, `d`: why".
func (r *Rules) parseException(l string, line int) error {
	from, rest, ok := strings.Cut(l, "→")
	to, _, _ := strings.Cut(rest, ": ")

	e := Exception{From: names(from), To: names(to), Line: line}
	if !ok || len(e.From) == 0 || len(e.To) == 0 {
		return fmt.Errorf("an exception reads - `importer` → `imported`, …: reason")
	}

	r.Exceptions = append(r.Exceptions, e)

	return nil
}

// parseNarrower reads "- `p` imports only `a`, `b`: why" and
// "- `p` imports none of `a`, `b`: why".
func (r *Rules) parseNarrower(l string, line int) error {
	head, _, _ := strings.Cut(l, ": ")
	pkg, rest, _ := strings.Cut(head, " imports ")
	n := Narrower{Line: line, Patterns: names(rest)}

	switch p := names(pkg); {
	case len(p) != 1 || len(n.Patterns) == 0:
		return fmt.Errorf("a narrower rule reads - `package` imports only (or none of) `a`, `b`: reason")
	default:
		n.Pkg = p[0]
	}

	switch {
	case strings.HasPrefix(strings.TrimSpace(rest), "only "):
		n.Only = true
	case strings.HasPrefix(strings.TrimSpace(rest), "none of "):
	default:
		return fmt.Errorf("a narrower rule says \"imports only\" or \"imports none of\"")
	}

	r.Narrower = append(r.Narrower, n)

	return nil
}

// names returns the backticked names of s outside parentheses.
func names(s string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(withoutParens(s), -1) {
		out = append(out, m[1])
	}

	return out
}

// withoutParens drops what is in (possibly nested) parentheses.
func withoutParens(s string) string {
	var (
		b     strings.Builder
		depth int
	)

	for _, c := range s {
		switch {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}

	return b.String()
}
