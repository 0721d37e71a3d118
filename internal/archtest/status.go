package archtest

import (
	"go/ast"
	"slices"
	"strings"
)

const (
	statusPath = "google.golang.org/grpc/status"
	codesPath  = "google.golang.org/grpc/codes"
)

// codeReaders are the trees that read codes but serve none: the tests'
// expectations and the CLI's explanations return and assign codes freely.
var codeReaders = []string{"e2e/", "cmd/"}

const statusRule = "gRPC codes are chosen only in the functions docs/architecture.md names (\"Where errors become gRPC codes\" and its list of statuses made elsewhere)"

// checkStatus finds the statuses made (status.Error, Errorf, New, Newf),
// and the codes returned or assigned (a code chosen for a status made
// elsewhere), outside the functions the document names.
func (s *source) checkStatus(allowed []FuncRef) []Violation {
	var out []Violation

	for _, f := range s.files {
		reader := slices.ContainsFunc(codeReaders, func(p string) bool { return strings.HasPrefix(f.rel, p) })

		f.eachDecl(func(name string, n ast.Node) {
			if slices.Contains(allowed, FuncRef{File: f.rel, Func: name}) {
				return
			}

			var parents []ast.Node

			ast.Inspect(n, func(n ast.Node) bool {
				if n == nil {
					parents = parents[:len(parents)-1]

					return true
				}

				switch n := n.(type) {
				case *ast.CallExpr:
					if fn, ok := f.pkgCall(n, statusPath, "Error", "Errorf", "New", "Newf"); ok {
						out = append(out, Violation{s.where(n.Pos(), f.rel), "status." + fn + " in " + name + ": " + statusRule})
					}
				case *ast.SelectorExpr:
					if _, ok := f.isPkgSel(n, codesPath, n.Sel.Name); ok && !reader && n.Sel.Name != "Code" && chosen(parents[len(parents)-1]) {
						out = append(out, Violation{s.where(n.Pos(), f.rel), "codes." + n.Sel.Name + " returned or assigned in " + name + ": " + statusRule})
					}
				}

				parents = append(parents, n)

				return true
			})
		})
	}

	return out
}

// chosen reports whether a code under parent is chosen (returned,
// assigned, declared) rather than compared with.
func chosen(parent ast.Node) bool {
	switch parent.(type) {
	case *ast.ReturnStmt, *ast.AssignStmt, *ast.ValueSpec:
		return true
	}

	return false
}
