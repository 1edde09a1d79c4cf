package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// apiPkg is the import path of the package whose doc comments become
// descriptions.
var apiPkg = reflect.TypeFor[api.GitRepo]().PkgPath()

// apiDocs reads the doc comments of internal/api's types and struct
// fields from its source, found from the working directory up to the
// module root: "Type" and "Type.Field" → the comment as one line.
func apiDocs() (map[string]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	dir := filepath.Join(root, "internal", "api")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		collectDocs(f, docs)
	}
	return docs, nil
}

// collectDocs adds the docs of f's type declarations and their fields.
func collectDocs(f *ast.File, docs map[string]string) {
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			doc := ts.Doc
			if doc == nil && len(gen.Specs) == 1 {
				doc = gen.Doc
			}
			if text := oneLine(doc); text != "" {
				docs[ts.Name.Name] = text
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, field := range st.Fields.List {
				text := oneLine(field.Doc)
				for _, name := range field.Names {
					if text != "" {
						docs[ts.Name.Name+"."+name.Name] = text
					}
				}
			}
		}
	}
}

// oneLine is a comment's text with its lines joined.
func oneLine(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	return strings.Join(strings.Fields(c.Text()), " ")
}

// moduleRoot is the nearest directory at or above the working directory
// that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory: run crdgen inside the repository")
		}
		dir = parent
	}
}
