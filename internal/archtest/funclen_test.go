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
	"regexp"
	"slices"
	"strings"
	"testing"
)

// MaxFuncLines is the longest a production function may be (its lines from
// func to the closing brace).
const MaxFuncLines = 80

// longFuncsFile lists the production functions known to be longer, as
// "path: name lines", one a line: the debt issue 24 pays down.
const longFuncsFile = "testdata/long-functions.txt"

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestNoNewLongFunctions: no production function (tests, test/, the *test
// and *fake helper packages and generated code left out) is longer than
// MaxFuncLines unless testdata/long-functions.txt lists it; a listed
// function that is gone or now short fails too, so the list only shrinks.
// Split a long function along the steps it shows (table-driven where it is
// a table) rather than listing it.
func TestNoNewLongFunctions(t *testing.T) {
	found, err := longFunctions(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	known, err := readLongFuncs(longFuncsFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range found {
		if _, ok := known[name]; !ok {
			t.Errorf("%s is %d lines, over %d: split it along its steps", name, n, MaxFuncLines)
		}
	}
	for name := range known {
		if _, ok := found[name]; !ok {
			t.Errorf("%s is listed in %s but is no longer over %d lines: remove the line", name, longFuncsFile, MaxFuncLines)
		}
	}
	if t.Failed() {
		t.Logf("the production functions over %d lines now:\n%s", MaxFuncLines, listLongFuncs(found))
	}
}

// longFunctions maps "path: name" to the length of each production
// function over MaxFuncLines under root.
func longFunctions(root string) (map[string]int, error) {
	out := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel == "test" || base == "testdata" || (rel != "." && strings.HasPrefix(base, ".")) ||
				strings.HasSuffix(base, "test") || strings.HasSuffix(base, "fake") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > MaxFuncLines {
				out[rel+": "+funcName(fn)] = n
			}
		}
		return nil
	})
	return out, err
}

// funcName is Recv.Name for a method, Name for a function.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// readLongFuncs reads the known list: "path: name lines" (the count is
// for the reader; # starts a comment).
func readLongFuncs(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for i := 1; sc.Scan(); i++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || !strings.HasSuffix(fields[0], ":") {
			return nil, fmt.Errorf("%s:%d: %q: want \"path: name lines\"", path, i, line)
		}
		out[fields[0]+" "+fields[1]] = true
	}
	return out, sc.Err()
}

// listLongFuncs writes found in the known list's form, sorted.
func listLongFuncs(found map[string]int) string {
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %d\n", n, found[n])
	}
	return b.String()
}
