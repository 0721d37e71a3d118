package talossuite

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// apiDir is the folder of the api suites in Talos's source.
const apiDir = "internal/integration/api"

// SourceTests lists the tests of the api suites in Talos's source tree at
// root, as "Suite/TestMethod": the methods named Test… of every type with a
// SuiteName method that returns a constant, which is what testify runs.
func SourceTests(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, apiDir, "*.go"))
	if err != nil {
		return nil, err
	}

	if len(files) == 0 {
		return nil, fmt.Errorf("talossuite: no Go files in %s", filepath.Join(root, apiDir))
	}

	names := map[string]string{}     // receiver type → suite name
	methods := map[string][]string{} // receiver type → Test methods
	fset := token.NewFileSet()

	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}

		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("talossuite: %w", err)
		}

		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}

			recv := receiverType(fn.Recv.List[0].Type)

			switch name := fn.Name.Name; {
			case name == "SuiteName":
				if lit := returnedString(fn); lit != "" {
					names[recv] = lit
				}
			case strings.HasPrefix(name, "Test"):
				methods[recv] = append(methods[recv], name)
			}
		}
	}

	var out []string

	for recv, suite := range names {
		for _, m := range methods[recv] {
			out = append(out, suite+"/"+m)
		}
	}

	slices.Sort(out)

	return out, nil
}

func receiverType(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}

	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}

	return ""
}

// returnedString returns the string constant a one-statement function
// returns, or "".
func returnedString(fn *ast.FuncDecl) string {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return ""
	}

	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return ""
	}

	lit, ok := ret.Results[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}

	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}

	return s
}
