package main

import (
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// entityRef is what a NAME argument of status, sync, pause, resume,
// delete, diff and approve names: "name" or "gitrepo/name" is a GitRepo,
// "helmop/name" a HelmOp (kubectl's kind/name form).
type entityRef struct{ kind, namespace, name string }

func parseEntity(namespace, arg string) entityRef {
	if name, ok := strings.CutPrefix(arg, "helmop/"); ok {
		return entityRef{kind: api.KindHelmOp, namespace: namespace, name: name}
	}
	if name, ok := strings.CutPrefix(arg, "helmops/"); ok {
		return entityRef{kind: api.KindHelmOp, namespace: namespace, name: name}
	}
	arg = strings.TrimPrefix(strings.TrimPrefix(arg, "gitrepos/"), "gitrepo/")
	return entityRef{kind: api.KindGitRepo, namespace: namespace, name: arg}
}

// id is the entity workflow's ID.
func (e entityRef) id() string {
	if e.kind == api.KindHelmOp {
		return protocol.HelmOpID(e.namespace, e.name)
	}
	return protocol.GitRepoID(e.namespace, e.name)
}

// title names it in messages: "GitRepo ns/name".
func (e entityRef) title() string { return e.kind + " " + e.namespace + "/" + e.name }

// String is how apply and the signal commands print it: "gitrepo/ns/name".
func (e entityRef) String() string {
	return strings.ToLower(e.kind) + "/" + e.namespace + "/" + e.name
}

// checkHelmOps checks the bundle part of each HelmOp document as a
// fleet.yaml is checked (internal/bundle), and adds a warning for each key
// it ignores.
func checkHelmOps(docs []api.Document) error {
	for i := range docs {
		h := docs[i].HelmOp
		if h == nil {
			continue
		}
		unknown, err := bundle.CheckHelmOp(docs[i].Source, h.Metadata.Name, h.Spec.Bundle)
		if err != nil {
			return fmt.Errorf("%s: HelmOp %s: spec: %w", docs[i].Source, docs[i].Name(), err)
		}
		for _, k := range unknown {
			docs[i].Warnings = append(docs[i].Warnings,
				fmt.Sprintf("%s: HelmOp %s: unknown field %q (ignored)", docs[i].Source, docs[i].Name(), "spec."+k))
		}
	}
	return nil
}
