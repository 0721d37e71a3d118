package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Violation is one place where the code breaks a rule of the document.
type Violation struct {
	// Where is the importing package, or file:line.
	Where string
	Msg   string
}

func (v Violation) String() string { return v.Where + ": " + v.Msg }

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Module     *struct{ Path string }
}

// ListPackages runs `go list -json ./...` in root, the root of a module,
// and returns its packages with their imports of the module's own
// packages, by path from the module root. Packages made only of tests are
// left out: tests are out of the layers' scope.
func ListPackages(root string) (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")

	var stderr bytes.Buffer
	cmd.Stderr = &stderr

	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", root, err, stderr.String())
	}

	var all []listed

	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}

		all = append(all, p)
	}

	pkgs := map[string][]string{}

	for _, p := range all {
		if p.Module == nil || len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue
		}

		mod := p.Module.Path
		rel, ok := relPath(mod, p.ImportPath)
		if !ok {
			continue
		}

		imports := []string{}

		for _, imp := range p.Imports {
			if r, ok := relPath(mod, imp); ok {
				imports = append(imports, r)
			}
		}

		pkgs[rel] = imports
	}

	return pkgs, nil
}

func relPath(mod, path string) (string, bool) {
	if path == mod {
		return ".", true
	}

	rel, ok := strings.CutPrefix(path, mod+"/")

	return rel, ok
}

// match reports whether pattern names pkg, and how specifically: an exact
// name beats every glob, a longer glob a shorter one.
func match(pattern, pkg string) (int, bool) {
	if prefix, ok := strings.CutSuffix(pattern, "/*"); ok {
		return len(prefix), strings.HasPrefix(pkg, prefix+"/")
	}

	return 1 << 20, pattern == pkg
}

func matchAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if _, ok := match(p, pkg); ok {
			return true
		}
	}

	return false
}

// placed is a package's layer (its index) and component.
type placed struct {
	layer     int
	component string
}

// place finds pkg's layer and component from its most specific pattern.
func (r *Rules) place(pkg string) (placed, bool) {
	best, found := -1, placed{}

	for i, l := range r.Layers {
		for _, p := range l.Patterns {
			if s, ok := match(p, pkg); ok && s > best {
				best, found = s, placed{layer: i, component: strings.TrimSuffix(p, "/*")}
			}
		}
	}

	return found, best >= 0
}

// CheckImports holds every import of pkgs (as ListPackages returns them)
// to the rules: each package in a layer, each import allowed by its layer,
// its component or a named exception, and by the narrower rules.
func (r *Rules) CheckImports(pkgs map[string][]string) []Violation {
	var out []Violation

	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}

	slices.Sort(names)

	out = append(out, r.stale(names)...)

	for _, pkg := range names {
		from, ok := r.place(pkg)
		if !ok {
			out = append(out, Violation{pkg, "belongs to no layer: add it to a row of the import table in docs/architecture.md (a new tree is a new row)"})

			continue
		}

		for _, imp := range pkgs[pkg] {
			if msg := r.checkImport(pkg, from, imp); msg != "" {
				out = append(out, Violation{pkg, "imports " + imp + ": " + msg})
			}
		}
	}

	return out
}

// stale reports the narrower rules and named exceptions that name no
// package of the module: a rule about a package that moved would hold
// nothing and pass for ever.
func (r *Rules) stale(names []string) []Violation {
	var out []Violation

	exists := func(pattern string) bool {
		return slices.ContainsFunc(names, func(pkg string) bool { _, ok := match(pattern, pkg); return ok })
	}

	for _, n := range r.Narrower {
		if !exists(n.Pkg) {
			out = append(out, Violation{fmt.Sprintf("docs/architecture.md:%d", n.Line), "the narrower rule names " + n.Pkg + ", which is no package of the module"})
		}
	}

	for _, e := range r.Exceptions {
		for _, p := range append(slices.Clone(e.From), e.To...) {
			if !exists(p) {
				out = append(out, Violation{fmt.Sprintf("docs/architecture.md:%d", e.Line), "the named exception names " + p + ", which is no package of the module"})
			}
		}
	}

	return out
}

func (r *Rules) excepted(pkg, imp string) bool {
	for _, e := range r.Exceptions {
		if matchAny(e.From, pkg) && matchAny(e.To, imp) {
			return true
		}
	}

	return false
}

// checkImport returns the rule pkg breaks by importing imp, or "".
func (r *Rules) checkImport(pkg string, from placed, imp string) string {
	if r.excepted(pkg, imp) {
		return ""
	}

	for _, n := range r.Narrower {
		if n.Pkg == pkg && n.Only != matchAny(n.Patterns, imp) {
			how := "none of"
			if n.Only {
				how = "only"
			}

			return fmt.Sprintf("%s imports %s %s (narrower rule, line %d), and no named exception allows it", pkg, how, strings.Join(n.Patterns, ", "), n.Line)
		}
	}

	to, ok := r.place(imp)
	if !ok {
		return "the imported package belongs to no layer"
	}

	l, tl := r.Layers[from.layer], r.Layers[to.layer]

	switch {
	case l.Anything:
		return ""
	case l.Own && from.component == to.component:
		return ""
	case slices.Contains(l.Layers, tl.Name) && (to.layer < from.layer || tl.Name == l.Name):
		return ""
	case matchAny(l.Packages, imp):
		return ""
	case to.layer > from.layer:
		return fmt.Sprintf("up a layer: %s is in %s, above %s (%s); no named exception allows it", imp, tl.Name, l.Name, pkg)
	case to.layer == from.layer && from.component != to.component:
		return fmt.Sprintf("across components of the %s layer (%s → %s); no named exception allows it", l.Name, from.component, to.component)
	default:
		return fmt.Sprintf("the %s layer may import %s; %s is in %s and no named exception allows it", l.Name, l.allowed(), imp, tl.Name)
	}
}

func (l Layer) allowed() string {
	var parts []string
	parts = append(parts, l.Layers...)
	parts = append(parts, l.Packages...)

	if l.Own {
		parts = append(parts, "its own component")
	}

	return strings.Join(parts, ", ")
}
