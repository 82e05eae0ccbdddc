package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// apiModules are the published modules whose exported API the snapshot in
// api/ records, one file each, named after the module's directory.
var apiModules = map[string]string{
	"fencegate.txt":     libraryPath,
	"cmd-fencegate.txt": libraryPath + "/cmd/fencegate",
	"etcdfence.txt":     libraryPath + "/etcdfence",
	"riverfence.txt":    libraryPath + "/riverfence",
}

// exportedAPI lists, one line each and sorted, every exported declaration
// of the module's importable packages (not internal, not main, not tests)
// as its source spells it: functions and methods with their signatures,
// constants, variables, types, struct fields and interface methods, in the
// spirit of Go's own api/*.txt. It reads source only (go list and the
// parser), so it costs no compilation.
func exportedAPI(dir, modulePath string) ([]string, error) {
	out, err := output(context.Background(), dir, nil, "go", "list", "-f",
		"{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", modulePath+"/...")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, row := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(row, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("go list: unexpected line %q", row)
		}
		path, name, pkgDir, files := f[0], f[1], f[2], f[3]
		if name == "main" || isInternal(path) || !inModule(path, modulePath) || files == "" {
			continue
		}
		fset := token.NewFileSet()
		for _, file := range strings.Split(files, ",") {
			af, err := parser.ParseFile(fset, filepath.Join(pkgDir, file), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			lines = append(lines, fileAPI("pkg "+path+", ", fset, af)...)
		}
	}
	sort.Strings(lines)
	return slices.Compact(lines), nil
}

// inModule leaves out packages of modules nested below modulePath.
func inModule(pkg, modulePath string) bool {
	var nested []string
	for _, dir := range unpublished {
		nested = append(nested, libraryPath+"/"+dir)
	}
	for _, m := range apiModules {
		nested = append(nested, m)
	}
	for _, n := range nested {
		if n != modulePath && strings.HasPrefix(n, modulePath+"/") && (pkg == n || strings.HasPrefix(pkg, n+"/")) {
			return false
		}
	}
	return true
}

func isInternal(pkg string) bool {
	return strings.HasSuffix(pkg, "/internal") || strings.Contains(pkg, "/internal/")
}

func fileAPI(prefix string, fset *token.FileSet, f *ast.File) []string {
	src := func(n ast.Node) string {
		var b bytes.Buffer
		_ = (&printer.Config{Mode: printer.RawFormat}).Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	var lines []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			sig := strings.TrimPrefix(src(d.Type), "func")
			if d.Recv == nil {
				lines = append(lines, prefix+"func "+d.Name.Name+sig)
			} else if recvExported(d.Recv.List[0].Type) {
				lines = append(lines, prefix+"method ("+src(d.Recv.List[0].Type)+") "+d.Name.Name+sig)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					kind := d.Tok.String()
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						l := prefix + kind + " " + n.Name
						if s.Type != nil {
							l += " " + src(s.Type)
						}
						lines = append(lines, l)
					}
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						lines = append(lines, typeAPI(prefix, s, src)...)
					}
				}
			}
		}
	}
	return lines
}

func typeAPI(prefix string, s *ast.TypeSpec, src func(ast.Node) string) []string {
	name := s.Name.Name
	if s.TypeParams != nil {
		name += "[" + strings.TrimSuffix(strings.TrimPrefix(src(s.TypeParams), "["), "]") + "]"
	}
	if s.Assign.IsValid() {
		return []string{prefix + "type " + name + " = " + src(s.Type)}
	}
	head := prefix + "type " + name
	switch t := s.Type.(type) {
	case *ast.StructType:
		lines := []string{head + " struct"}
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if embedName(f.Type).IsExported() {
					lines = append(lines, head+" struct, embedded "+src(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					lines = append(lines, head+" struct, "+n.Name+" "+src(f.Type))
				}
			}
		}
		return lines
	case *ast.InterfaceType:
		lines := []string{head + " interface"}
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				lines = append(lines, head+" interface, embeds "+src(m.Type))
				continue
			}
			for _, n := range m.Names {
				if n.IsExported() {
					lines = append(lines, head+" interface, "+n.Name+strings.TrimPrefix(src(m.Type), "func"))
				}
			}
		}
		return lines
	}
	return []string{head + " " + src(s.Type)}
}

// recvExported reports whether a method's receiver type is exported, so
// that methods of unexported types stay out.
func recvExported(t ast.Expr) bool { return embedName(t).IsExported() }

// embedName is the type name under pointers, generics' brackets and
// package qualifiers.
func embedName(t ast.Expr) *ast.Ident {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.SelectorExpr:
			return x.Sel
		case *ast.Ident:
			return x
		default:
			return ast.NewIdent("_")
		}
	}
}
