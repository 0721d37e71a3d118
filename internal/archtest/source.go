package archtest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// file is one parsed non-test, non-generated Go file of a module.
type file struct {
	rel string // path from the module root, with slashes
	dir string // its package, by path from the module root
	ast *ast.File
	// imports maps the file's import names to import paths.
	imports map[string]string
}

// source is a module's files, parsed once for every check.
type source struct {
	module string
	fset   *token.FileSet
	files  []*file
}

// parseModule parses the non-test, non-generated Go files under root (a
// module root with a go.mod), skipping testdata, vendor and hidden
// directories.
func parseModule(root string) (*source, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}

	src := &source{module: mod, fset: token.NewFileSet()}

	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}

			return nil
		}

		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}

		f, err := parser.ParseFile(src.fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}

		if ast.IsGenerated(f) {
			return nil
		}

		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src.files = append(src.files, &file{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), ast: f, imports: importNames(f)})

		return nil
	})

	return src, err
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()

	for s := bufio.NewScanner(f); s.Scan(); {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}

	return "", fmt.Errorf("%s names no module", gomod)
}

func importNames(f *ast.File) map[string]string {
	m := map[string]string{}

	for _, spec := range f.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]

		if spec.Name != nil {
			name = spec.Name.Name
		}

		m[name] = path
	}

	return m
}

// pkgCall reports whether call is pkg.Name(…) for one of names, where pkg
// is the file's name for the import path.
func (f *file) pkgCall(call *ast.CallExpr, path string, names ...string) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}

	return f.isPkgSel(sel, path, names...)
}

func (f *file) isPkgSel(sel *ast.SelectorExpr, path string, names ...string) (string, bool) {
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Obj != nil || f.imports[id.Name] != path {
		return "", false
	}

	for _, n := range names {
		if sel.Sel.Name == n {
			return n, true
		}
	}

	return "", false
}

// eachDecl calls fn with every top-level declaration's name (a function's
// or method's, or each name of a package-level var or const) and node.
func (f *file) eachDecl(fn func(name string, n ast.Node)) {
	for _, d := range f.ast.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			fn(d.Name.Name, d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok && len(vs.Names) > 0 {
					fn(vs.Names[0].Name, vs)
				}
			}
		}
	}
}

func (s *source) where(pos token.Pos, rel string) string {
	return fmt.Sprintf("%s:%d", rel, s.fset.Position(pos).Line)
}
