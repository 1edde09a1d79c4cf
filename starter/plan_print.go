package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/plan"
)

// printPlan writes res in format f: JSON or YAML of the plan.Result as it
// is, or for people (Table) one block per cluster ("cluster-1", or
// "cluster-3 (offline: reason)"), a line per release ("~ upgrade  bundle
// ns/release  from→to"), under it each changed object ("  ~ ConfigMap
// ns/name") with its diff indented, refusals as "  ! Kind ns/name: error",
// and a last summary line (plan.Result.Summary). Objects the plan leaves
// unchanged are not listed.
func printPlan(w io.Writer, f output.Format, res plan.Result) error {
	if f != output.Table {
		if res.Clusters == nil {
			res.Clusters = []plan.Cluster{}
		}
		return output.Print(w, f, res, output.Rows{})
	}
	var b strings.Builder
	writePlanHeader(&b, res)
	for _, c := range res.Clusters {
		writePlanCluster(&b, c)
	}
	b.WriteString(res.Summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePlanHeader writes what is planned: the GitRepo, the commit and
// where it came from, the commit it replaces, and render warnings.
func writePlanHeader(b *strings.Builder, res plan.Result) {
	fmt.Fprintf(b, "Plan of %s at %s", res.GitRepo, short(res.Commit))
	if res.Source != "" {
		fmt.Fprintf(b, " (%s)", res.Source)
	}
	if res.Base != "" {
		fmt.Fprintf(b, ", running %s", short(res.Base))
	}
	b.WriteString("\n")
	for _, w := range res.Warnings {
		b.WriteString("warning: " + w + "\n")
	}
}

func writePlanCluster(b *strings.Builder, c plan.Cluster) {
	b.WriteString("\n" + c.Name)
	if c.Offline {
		fmt.Fprintf(b, " (offline: %s)", oneLine(c.Reason))
	}
	b.WriteString("\n")
	if c.Error != "" {
		b.WriteString("  ! " + oneLine(c.Error) + "\n")
	}
	if len(c.Releases) == 0 && c.Error == "" {
		b.WriteString("  (no releases)\n")
	}
	for _, r := range c.Releases {
		writePlanRelease(b, r)
	}
}

func writePlanRelease(b *strings.Builder, r plan.Release) {
	fmt.Fprintf(b, "%s %-9s  %s  %s/%s", actionSymbol(r.Action), r.Action, r.Bundle, r.Namespace, r.Release)
	if r.From != "" || r.To != "" {
		fmt.Fprintf(b, "  %s→%s", orDash(shortID(r.From)), orDash(shortID(r.To)))
	}
	b.WriteString("\n")
	if r.Error != "" {
		b.WriteString("  ! " + oneLine(r.Error) + "\n")
	}
	for _, o := range r.Objects {
		name := o.Name
		if o.Namespace != "" {
			name = o.Namespace + "/" + o.Name
		}
		if o.Change != plan.NoChange && o.Change != "" {
			fmt.Fprintf(b, "  %s %s %s\n", changeSymbol(o.Change), o.Kind, name)
		}
		if o.Error != "" {
			fmt.Fprintf(b, "  ! %s %s: %s\n", o.Kind, name, oneLine(o.Error))
		}
		if o.Diff != "" {
			b.WriteString(indent(strings.TrimRight(o.Diff, "\n"), "      ") + "\n")
		}
	}
}

func actionSymbol(a plan.Action) string {
	switch a {
	case plan.Install:
		return "+"
	case plan.Upgrade:
		return "~"
	case plan.Uninstall:
		return "-"
	default:
		return "="
	}
}

func changeSymbol(c plan.Change) string {
	switch c {
	case plan.Create:
		return "+"
	case plan.Update:
		return "~"
	case plan.Delete:
		return "-"
	default:
		return "="
	}
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shortID abbreviates a deployment ID ("s-<manifest>:<options>") to 10
// characters a part, enough to tell two apart in a plan.
func shortID(id string) string {
	parts := strings.SplitN(id, ":", 2)
	for i, p := range parts {
		if len(p) > 10 {
			parts[i] = p[:10]
		}
	}
	return strings.Join(parts, ":")
}
