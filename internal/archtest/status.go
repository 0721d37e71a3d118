package archtest

import (
	"go/ast"
	"slices"
)

const statusPath = "google.golang.org/grpc/status"

// checkStatus finds the statuses made (status.Error, Errorf, New, Newf)
// outside the functions the document names.
func (s *source) checkStatus(allowed []FuncRef) []Violation {
	var out []Violation

	for _, f := range s.files {
		f.eachDecl(func(name string, n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}

				fn, ok := f.pkgCall(call, statusPath, "Error", "Errorf", "New", "Newf")
				if ok && !slices.Contains(allowed, FuncRef{File: f.rel, Func: name}) {
					out = append(out, Violation{s.where(call.Pos(), f.rel),
						"status." + fn + " in " + name + ": gRPC codes are chosen only in the functions the table \"Where errors become gRPC codes\" of docs/architecture.md names (or its list of statuses made elsewhere)"})
				}

				return true
			})
		})
	}

	return out
}
