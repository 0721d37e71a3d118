package archtest

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
)

const defaultsPkg = "internal/defaults"

// defaulted are the Config fields whose nil default internal/defaults
// applies.
var defaulted = []string{"Logger", "Clock", "Rand", "Log"}

// defaultsFunc is the function of internal/defaults for each field.
var defaultsFunc = map[string]string{"Logger": "Logger", "Clock": "Clock (or Now)", "Rand": "Rand", "Log": "Output (or Logger)"}

// checkDefaults finds `if x.F == nil { x.F = … }` for the fields of
// defaulted, outside internal/defaults.
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

			field := nilChecked(st.Cond)
			if field == nil {
				return true
			}

			if assigns(st.Body, field) {
				out = append(out, Violation{s.where(st.Pos(), f.rel),
					"default of " + types.ExprString(field) + " set by its own nil check: use defaults." + defaultsFunc[field.Sel.Name] + " (internal/defaults)"})
			}

			return true
		})
	}

	return out
}

// nilChecked returns x.F of a condition `x.F == nil` (or `nil == x.F`)
// for a field F of defaulted.
func nilChecked(cond ast.Expr) *ast.SelectorExpr {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return nil
	}

	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		sel, ok := pair[0].(*ast.SelectorExpr)
		if ok && isIdent(pair[1], "nil") && slices.Contains(defaulted, sel.Sel.Name) {
			return sel
		}
	}

	return nil
}

// assigns reports whether body assigns to field (the same expression).
func assigns(body *ast.BlockStmt, field *ast.SelectorExpr) bool {
	want := types.ExprString(field)
	found := false

	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok {
			for _, l := range as.Lhs {
				if types.ExprString(l) == want {
					found = true
				}
			}
		}

		return !found
	})

	return found
}
