package carryover

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the house's limit on a shipped Go function (docs/architecture.md): a longer one
// hides a helper with a name that would say what it does.
const maxFuncLines = 80

// TestNoLongFunctions: no shipped Go function (a declaration or a literal, tests excluded) is longer
// than maxFuncLines, from its func keyword to its closing brace.
func TestNoLongFunctions(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, long := range longFuncs(t, path) {
			t.Errorf("%s: %d lines (the limit is %d): split it", long.where, long.lines, maxFuncLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type longFunc struct {
	where string // file:line of the func keyword
	lines int
}

// longFuncs parses path and lists its functions longer than maxFuncLines.
func longFuncs(t *testing.T, path string) []longFunc {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	var out []longFunc
	ast.Inspect(f, func(n ast.Node) bool {
		var body *ast.BlockStmt
		switch fn := n.(type) {
		case *ast.FuncDecl:
			body = fn.Body
		case *ast.FuncLit:
			body = fn.Body
		}
		if body == nil {
			return true
		}
		start := fset.Position(n.Pos())
		if lines := fset.Position(body.Rbrace).Line - start.Line + 1; lines > maxFuncLines {
			out = append(out, longFunc{where: start.String(), lines: lines})
		}
		return true
	})
	return out
}
