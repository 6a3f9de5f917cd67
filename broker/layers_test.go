package broker_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The layers of docs/architecture.md, as import rules on the non-test code
// of the module (go list): data flows one way, and only the wiring and the
// backends name the storage seam.
const mod = "github.com/sluicemq/sluice"

// listed is what go list tells of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

// listAll lists every package of the module with its imports and deps.
func listAll(t *testing.T) map[string]listed {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", mod+"/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) < 30 {
		t.Fatalf("go list answered only %d packages", len(pkgs))
	}
	return pkgs
}

// TestLayers checks the import rules:
//   - no package under api/ (the stream API, api/stream, included), nor webhook,
//     live, metrics or dashboard, imports the storage seam or a backend:
//     they reach the store through the front;
//   - the backends never depend on the front (package broker), even
//     transitively;
//   - package model imports the standard library only, and the storage seam
//     nothing of Sluice's but model;
//   - the planners are internal (broker/internal/...), so only the broker's
//     packages can call them.
func TestLayers(t *testing.T) {
	t.Parallel()
	pkgs := listAll(t)
	seam := []string{mod + "/broker/storage", mod + "/broker/embedded", mod + "/broker/postgres"}
	for path, p := range pkgs {
		rel := strings.TrimPrefix(path, mod+"/")
		if !strings.HasPrefix(path, mod+"/") {
			continue
		}
		top := strings.SplitN(rel, "/", 2)[0]
		if top == "api" || rel == "webhook" || rel == "live" || rel == "metrics" || rel == "dashboard" {
			for _, imp := range p.Imports {
				for _, s := range seam {
					if imp == s || strings.HasPrefix(imp, s+"/") {
						t.Errorf("%s imports %s: an API or service reaches the store through the front only", rel, imp)
					}
				}
			}
		}
		if rel == "broker/embedded" || rel == "broker/postgres" || strings.HasPrefix(rel, "broker/internal/") || rel == "broker/model" || rel == "broker/storage" {
			for _, d := range append(p.Deps, p.Imports...) {
				if d == mod+"/broker" {
					t.Errorf("%s depends on the front (package broker)", rel)
				}
			}
		}
	}
	for _, d := range pkgs[mod+"/broker/model"].Deps {
		if dp, ok := pkgs[d]; ok && !dp.Standard {
			t.Errorf("broker/model depends on %s: it imports the standard library only", d)
		}
	}
	for _, imp := range pkgs[mod+"/broker/storage"].Imports {
		if strings.HasPrefix(imp, mod+"/") && imp != mod+"/broker/model" {
			t.Errorf("broker/storage imports %s: the seam names only model's values", imp)
		}
	}
	if _, ok := pkgs[mod+"/broker/internal/plan"]; !ok {
		t.Error("the planners' package broker/internal/plan is missing")
	}
}

// TestPlannersAreInternal: no exported function of the front, the model or
// the seam is a planner (a name starting with Plan), so a rule that runs
// inside a backend's atomic step can be called by the broker's packages
// only.
func TestPlannersAreInternal(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "model", "storage"} {
		for name := range exportedNames(t, dir) {
			if strings.HasPrefix(name, "Plan") {
				t.Errorf("broker/%s exports %s: planners live in broker/internal/plan", dir, name)
			}
		}
	}
}

// TestFrontExports: the front (package broker) exports fewer than 120
// package-level names in its non-test files (methods not counted): the
// values are model's, the seam storage's, the rules the planners'.
func TestFrontExports(t *testing.T) {
	t.Parallel()
	names := exportedNames(t, ".")
	if len(names) >= 120 {
		t.Errorf("package broker exports %d package-level names, want < 120: %v", len(names), names)
	}
	if len(names) < 5 {
		t.Fatalf("package broker exports only %v: the count is broken", names)
	}
}

// exportedNames returns the exported package-level names declared in the
// non-test Go files of dir (methods not counted).
func exportedNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}
