// Package doccheck holds one test: every package's doc.go names only
// identifiers and files that exist. `make lint` runs it; a rename or a
// deletion that leaves a package doc describing the house one refactor ago
// fails here.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// notIdentifiers are CamelCase words of the docs that name things outside
// Go: OpenSSH options, products, formats.
var notIdentifiers = map[string]bool{
	"OpenSSH": true, "ControlMaster": true, "ControlPath": true,
	"ControlPersist": true, "MaxSessions": true, "ProxyJump": true,
	"PermitRootLogin": true, "GitHub": true, "MiB": true, "GiB": true,
	"KiB": true,
}

var (
	// pkg.Name or pkg.Name.Method, where pkg is one of the module's packages.
	qualifiedRE = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)
	// A CamelCase word: an upper-case letter after a lower-case one or a digit.
	camelRE = regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b`)
	// A function named with its call parentheses: script(), Do().
	callRE = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\(\)`)
	// A file of the package: steps.go, scripts/send.sh (a bare x.sh is
	// more often a file on an instance).
	fileRE = regexp.MustCompile(`(?:^|[\s(,])((?:[a-z0-9]+/)+[a-z0-9_]+\.sh|[a-z0-9][a-z0-9_]*\.go)\b`)
)

type pkgInfo struct {
	dir    string
	name   string
	idents map[string]bool // top-level names and Type.Method
	doc    string
}

func TestDocsNameWhatExists(t *testing.T) {
	root := moduleRoot(t)
	pkgs := map[string]*pkgInfo{} // by package name; the module's names are unique enough
	var withDoc []*pkgInfo
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		p, err := loadPkg(path)
		if err != nil {
			return err
		}
		if p == nil {
			return nil
		}
		if prev, ok := pkgs[p.name]; ok {
			for k := range p.idents { // two packages of one name: accept either's names
				prev.idents[k] = true
			}
		} else {
			pkgs[p.name] = p
		}
		if p.doc != "" {
			withDoc = append(withDoc, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(withDoc) < 5 {
		t.Fatalf("found %d doc.go files under %s; the walk is broken", len(withDoc), root)
	}
	anywhere := func(name string) bool {
		for _, p := range pkgs {
			if p.idents[name] {
				return true
			}
		}
		return false
	}
	for _, p := range withDoc {
		rel, _ := filepath.Rel(root, filepath.Join(p.dir, "doc.go"))
		var bad []string
		for _, m := range qualifiedRE.FindAllStringSubmatch(p.doc, -1) {
			q, ok := pkgs[m[1]]
			if !ok || m[1] == "docs" {
				continue // not one of ours (os.Root, t.Cleanup, design.md)
			}
			name := m[2]
			if m[3] != "" && q.idents[m[2]+"."+m[3]] {
				continue
			}
			if !q.idents[name] {
				bad = append(bad, m[0])
			}
		}
		for _, w := range camelRE.FindAllString(p.doc, -1) {
			if notIdentifiers[w] || p.idents[w] || anywhere(w) {
				continue
			}
			bad = append(bad, w)
		}
		for _, m := range callRE.FindAllStringSubmatch(p.doc, -1) {
			if !p.idents[m[1]] {
				bad = append(bad, m[0])
			}
		}
		for _, m := range fileRE.FindAllStringSubmatch(p.doc, -1) {
			f := m[1]
			if f == "doc.go" {
				continue
			}
			if _, err := os.Stat(filepath.Join(p.dir, f)); err != nil {
				bad = append(bad, f)
			}
		}
		sort.Strings(bad)
		for _, b := range dedupe(bad) {
			t.Errorf("%s names %q, which is not in package %s: rename it in the doc, or drop the sentence", rel, b, p.name)
		}
	}
	// The design and the other docs: a `pkg.Name` in code spans must exist.
	mds, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if len(mds) == 0 {
		t.Fatalf("no docs/*.md under %s", root)
	}
	for _, md := range mds {
		b, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, md)
		for i, line := range strings.Split(string(b), "\n") {
			for _, span := range codeSpanRE.FindAllStringSubmatch(line, -1) {
				for _, m := range qualifiedRE.FindAllStringSubmatch(span[1], -1) {
					q, ok := pkgs[m[1]]
					if !ok || q.idents[m[2]] {
						continue
					}
					t.Errorf("%s:%d names %q, which is not in package %s: rename it in the doc, or drop the sentence", rel, i+1, m[0], m[1])
				}
			}
		}
	}
}

// codeSpanRE is a Markdown code span on one line.
var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// loadPkg reads the non-test Go files of dir: nil when there are none.
func loadPkg(dir string) (*pkgInfo, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkgInfo{dir: dir, idents: map[string]bool{}}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") {
			continue
		}
		// Tests count for the names (a doc may name a benchmark), not
		// for the package's name or doc.
		test := strings.HasSuffix(n, "_test.go")
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if !test {
			p.name = f.Name.Name
		}
		if n == "doc.go" && f.Doc != nil {
			p.doc = f.Doc.Text()
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 {
					if r := recvName(d.Recv.List[0].Type); r != "" {
						p.idents[r+"."+d.Name.Name] = true
					}
				}
				p.idents[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.idents[s.Name.Name] = true
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									p.idents[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									p.idents[s.Name.Name+"."+n.Name] = true
									p.idents[n.Name] = true // a field named in prose
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.idents[n.Name] = true
						}
					}
				}
			}
		}
	}
	if p.name == "" {
		return nil, nil
	}
	return p, nil
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
