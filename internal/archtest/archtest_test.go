package archtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/burst-hpc/burst"

// programs are the top-level folders that build burst's five binaries.
var programs = []string{"resume", "suspend", "sizer", "agent", "slurm-conf"}

// roots are the packages only programs may import: the composition root
// and the command-line conventions.
var roots = []string{"internal/compose", "internal/cmdline"}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency checks list packages with go, which is not on PATH: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list", "-e", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v listed no packages", args)
	}
	return pkgs
}

// rel is an import path relative to the module ("" outside it).
func rel(path string) string {
	if path == module {
		return "."
	}
	r, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	return r
}

// under reports whether r is dir or inside it.
func under(r, dir string) bool { return r == dir || strings.HasPrefix(r, dir+"/") }

func programOf(r string) string {
	for _, p := range programs {
		if under(r, p) {
			return p
		}
	}
	return ""
}

// TestDependenciesPointDown: internal/ never imports a program (nor, outside
// its tests, test/); only programs import the composition root and the
// command-line package; a program imports internal/ and its own folder,
// never another program.
func TestDependenciesPointDown(t *testing.T) {
	pkgs := goList(t, module+"/...")
	seen := 0
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				to := rel(imp)
				if to == "" {
					continue
				}
				switch {
				case under(from, "internal"):
					seen++
					if prog := programOf(to); prog != "" {
						t.Errorf("%s imports %s: internal/ must not depend on the program %s/ (move what both need into internal/)", from, to, prog)
					}
					if !test && under(to, "test") {
						t.Errorf("%s imports %s: production code must not depend on test/", from, to)
					}
					// internal/cmdline/cmdlinetest: the programs' tests' helper for it
					if !under(from, "internal/compose") && !under(from, "internal/cmdline") && !test && slices.ContainsFunc(roots, func(r string) bool { return under(to, r) }) {
						t.Errorf("%s imports %s: only programs use the composition root and command-line package", from, to)
					}
				case programOf(from) != "" && !test:
					if prog := programOf(to); prog != "" && prog != programOf(from) {
						t.Errorf("%s imports %s: a program must not import another program (%s/); share through internal/", from, to, prog)
					}
					if under(to, "test") {
						t.Errorf("%s imports %s: production code must not depend on test/", from, to)
					}
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
	if seen == 0 {
		t.Fatal("no import of an internal package was checked; is the module path right?")
	}
}

// TestLeanHookPrograms: burst-resume and burst-suspend run inside
// slurmctld's power-saving loop and burst-agent on every node; none links
// SQLite, Prometheus or the simulator (or any other program's packages).
func TestLeanHookPrograms(t *testing.T) {
	pkgs := goList(t, "-deps", module+"/resume", module+"/suspend", module+"/agent")
	forbidden := []string{"modernc.org/sqlite", "github.com/prometheus/", module + "/sizer/", module + "/test/"}
	n := 0
	for _, p := range pkgs {
		n++
		for _, f := range forbidden {
			if p.ImportPath == strings.TrimSuffix(f, "/") || strings.HasPrefix(p.ImportPath, f) {
				t.Errorf("burst-resume, burst-suspend or burst-agent links %s (forbidden: %s)", p.ImportPath, f)
			}
		}
	}
	for _, must := range []string{module + "/internal/lifecycle", module + "/internal/compose"} {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == must }) {
			t.Errorf("go list -deps does not list %s: the check looks at the wrong thing", must)
		}
	}
	t.Logf("%d packages linked by burst-resume, burst-suspend and burst-agent", n)
}

// TestDesignMapNamesEveryPackage: the package table of docs/DESIGN.md
// names every package of the module and nothing that is not a folder.
func TestDesignMapNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "folder" {
			continue
		}
		for _, f := range strings.Split(cells[1], ",") {
			if f = strings.TrimSuffix(strings.TrimSpace(f), "/"); f != "" {
				named[f] = true
			}
		}
	}
	if len(named) < 10 {
		t.Fatalf("found %d folders in the DESIGN.md table; is the table there?", len(named))
	}
	for _, p := range goList(t, module+"/...") {
		if r := rel(p.ImportPath); !named[r] {
			t.Errorf("docs/DESIGN.md does not name the package %s", r)
		}
	}
	for f := range named {
		if fi, err := os.Stat(filepath.Join("..", "..", f)); err != nil || !fi.IsDir() {
			t.Errorf("docs/DESIGN.md names %s, which is not a folder of the tree", f)
		}
	}
}

// TestStoreImportsNoBuilder: sizer/store is storage; the types it returns
// live below it (internal/, sizer/billing), never in a package that builds
// reports or views from what it stores (sizer/report, sizer/dash, ...).
func TestStoreImportsNoBuilder(t *testing.T) {
	allowed := []string{"internal", "sizer/billing", "sizer/store"}
	checked := 0
	for _, p := range goList(t, module+"/sizer/store/...") {
		for _, imp := range p.Imports {
			to := rel(imp)
			if to == "" {
				continue
			}
			checked++
			if !slices.ContainsFunc(allowed, func(a string) bool { return under(to, a) }) {
				t.Errorf("%s imports %s: storage must not depend on what is built from it; move the type down (internal/sizerapi or the store itself)", rel(p.ImportPath), to)
			}
		}
	}
	if checked == 0 {
		t.Fatal("sizer/store imports no package of the module; is the module path right?")
	}
}
