package archtest

import (
	"go/ast"
	"go/token"
	"regexp"
	"strings"
)

const (
	slogPath    = "log/slog"
	logkeyPkg   = "internal/logkey"
	keyHowToFix = "log keys are constants of internal/logkey, used as they are"
)

// attrFuncs are slog's Attr constructors: their first argument is a key.
var attrFuncs = []string{"String", "Int", "Int64", "Uint64", "Float64", "Bool", "Time", "Duration", "Any", "Group"}

// keyStart is where the key-value pairs begin in the arguments of a
// logging method.
var keyStart = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// loggerName is what a logger's name looks like (s.log, cfg.Logger,
// audit, …): the receivers whose Info, Error, … calls take key-value pairs.
var loggerName = regexp.MustCompile(`(?i)log|audit`)

// checkLogKeys finds log keys written as string literals, or as string
// constants of a package other than internal/logkey, in slog's Attr
// constructors, slog.Attr literals and the key-value arguments of logging
// calls.
func (s *source) checkLogKeys() []Violation {
	consts := s.stringConsts()

	var out []Violation

	for _, f := range s.files {
		if f.dir == logkeyPkg {
			continue
		}

		check := func(key ast.Expr) {
			if why := f.badKey(key, consts, s.module); why != "" {
				out = append(out, Violation{s.where(key.Pos(), f.rel), why + ": " + keyHowToFix})
			}
		}

		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if _, ok := f.pkgCall(n, slogPath, attrFuncs...); ok && len(n.Args) > 0 {
					check(n.Args[0])
				} else if start, ok := f.logCall(n); ok {
					f.eachKey(n, start, consts, s.module, check)
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok {
					if _, ok := f.isPkgSel(sel, slogPath, "Attr"); ok {
						for _, e := range n.Elts {
							if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Key") {
								check(kv.Value)
							}
						}
					}
				}
			}

			return true
		})
	}

	return out
}

// logCall reports whether call is a logging call taking key-value pairs,
// and where they start.
func (f *file) logCall(call *ast.CallExpr) (int, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return 0, false
	}

	start, ok := keyStart[sel.Sel.Name]
	if !ok {
		return 0, false
	}

	if _, isSlog := f.isPkgSel(sel, slogPath, sel.Sel.Name); isSlog {
		return start, true
	}

	return start, loggerName.MatchString(lastName(sel.X))
}

// eachKey calls check with each key of the call's key-value pairs. An
// argument that is no key (a literal or a string constant) is taken for an
// Attr, which stands alone.
func (f *file) eachKey(call *ast.CallExpr, start int, consts map[string]map[string]bool, mod string, check func(ast.Expr)) {
	args := call.Args
	if call.Ellipsis.IsValid() && len(args) > 0 {
		args = args[:len(args)-1]
	}

	for i := start; i < len(args); {
		if f.isKey(args[i], consts, mod) {
			check(args[i])
			i += 2
		} else {
			i++
		}
	}
}

func (f *file) isKey(e ast.Expr, consts map[string]map[string]bool, mod string) bool {
	if lit, ok := e.(*ast.BasicLit); ok {
		return lit.Kind == token.STRING
	}

	pkg, name, ok := f.constRef(e, mod)

	_, known := consts[pkg][name]

	return ok && known
}

// badKey says what is wrong with key, or "".
func (f *file) badKey(key ast.Expr, consts map[string]map[string]bool, mod string) string {
	if lit, ok := key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		return "log key " + lit.Value + " is a string literal"
	}

	pkg, name, ok := f.constRef(key, mod)
	if ok && pkg != logkeyPkg && consts[pkg][name] {
		return "log key " + name + " is a constant of " + pkg + " with a value of its own"
	}

	return ""
}

// constRef resolves an identifier or pkg.Name of the module to the
// package (path from the module root) and name it refers to.
func (f *file) constRef(e ast.Expr, mod string) (pkg, name string, ok bool) {
	switch e := e.(type) {
	case *ast.Ident:
		return f.dir, e.Name, true
	case *ast.SelectorExpr:
		id, isIdent := e.X.(*ast.Ident)
		if !isIdent {
			return "", "", false
		}

		if rel, inModule := strings.CutPrefix(f.imports[id.Name], mod+"/"); inModule {
			return rel, e.Sel.Name, true
		}
	}

	return "", "", false
}

// stringConsts maps each package (path from the module root) to its
// package-level string constants: true for those whose value is a
// literal, false for those defined from another constant.
func (s *source) stringConsts() map[string]map[string]bool {
	m := map[string]map[string]bool{}

	for _, f := range s.files {
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}

			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}

					lit, isLit := vs.Values[i].(*ast.BasicLit)
					_, isRef := vs.Values[i].(*ast.SelectorExpr)

					if isLit && lit.Kind != token.STRING || !isLit && !isRef {
						continue
					}

					if m[f.dir] == nil {
						m[f.dir] = map[string]bool{}
					}

					m[f.dir][n.Name] = isLit
				}
			}
		}
	}

	return m
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)

	return ok && id.Name == name
}

// lastName is the last name in a receiver expression: log in s.cfg.log,
// Logger in cfg.Logger, With in log.With(…).
func lastName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.CallExpr:
		return lastName(e.Fun)
	case *ast.ParenExpr:
		return lastName(e.X)
	}

	return ""
}
