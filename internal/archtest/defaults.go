package archtest

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
)

const defaultsPkg = "internal/defaults"

// defaulted are the names (of Config fields, any case) whose nil default
// internal/defaults applies, with its function for each.
var defaulted = map[string]string{
	"logger": "Logger", "log": "Logger (or Output, for a writer)",
	"clock": "Clock (or Now)", "rand": "Rand",
}

// defaultValues are the defaults themselves: a nil check that sets one of
// them, whatever the name, is internal/defaults written again.
var defaultValues = map[string]string{
	"slog.New(slog.DiscardHandler)": "Logger", "slog.Default()": "Logger",
	"clock.Real()": "Clock", "rand.Reader": "Rand", "cryptorand.Reader": "Rand", "io.Discard": "Output",
}

// checkDefaults finds `if x.F == nil { x.F = … }` for the fields of
// defaulted, and any `if v == nil { v = D }` (or `return D`) for a default
// value D, outside internal/defaults.
func (s *source) checkDefaults() []Violation {
	var out []Violation

	for _, f := range s.files {
		if f.dir == defaultsPkg {
			continue
		}

		ast.Inspect(f.ast, func(n ast.Node) bool {
			st, ok := n.(*ast.IfStmt)
			if !ok {
				return true
			}

			x := nilChecked(st.Cond)
			if x == nil {
				return true
			}

			if fn := defaultSet(st.Body, x); fn != "" {
				out = append(out, Violation{s.where(st.Pos(), f.rel),
					"default of " + types.ExprString(x) + " set by its own nil check: use defaults." + fn + " (internal/defaults)"})
			}

			return true
		})
	}

	return out
}

// nilChecked returns x of a condition `x == nil` (or `nil == x`), x an
// identifier or a selector.
func nilChecked(cond ast.Expr) ast.Expr {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return nil
	}

	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		switch pair[0].(type) {
		case *ast.Ident, *ast.SelectorExpr:
			if isIdent(pair[1], "nil") {
				return pair[0]
			}
		}
	}

	return nil
}

// defaultSet returns the function of internal/defaults that the body
// rewrites, or "": an assignment to x.F for a field of defaulted, or an
// assignment to x (or a return) of a default value.
func defaultSet(body *ast.BlockStmt, x ast.Expr) string {
	want := types.ExprString(x)
	fn := ""

	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if types.ExprString(l) != want {
					continue
				}

				if sel, ok := l.(*ast.SelectorExpr); ok {
					if d, ok := defaulted[strings.ToLower(sel.Sel.Name)]; ok {
						fn = d
					}
				}

				if i < len(n.Rhs) {
					if d, ok := defaultValues[types.ExprString(n.Rhs[i])]; ok {
						fn = d
					}
				}
			}
		case *ast.ReturnStmt:
			if i := slices.IndexFunc(n.Results, func(e ast.Expr) bool { _, ok := defaultValues[types.ExprString(e)]; return ok }); i >= 0 {
				fn = defaultValues[types.ExprString(n.Results[i])]
			}
		}

		return fn == ""
	})

	return fn
}
