package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

func newDiffCommand(g *globals) *cobra.Command {
	var bundleName, clusterName string
	var fleetYAML bool
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show the objects of a GitRepo's releases that differ from Git on the clusters",
		Long: `Diff lists, per bundle and cluster, the objects the clusters' watches found modified (with the
JSON merge patch that restores Git's version), missing or orphaned. --fleet-yaml prints instead a
fleet.yaml diff.comparePatches section that makes drift detection ignore exactly these differences.
It exits 0 whether or not anything differs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, _ := g.format() // validated in PersistentPreRunE
			return g.withClient(cmd.Context(), time.Minute, func(ctx context.Context, c client.Client) error {
				st, err := gitRepoStatus(ctx, c, g.Namespace, args[0])
				if err != nil {
					return err
				}
				entries := driftEntries(st.Deployments, bundleName, clusterName)
				return printDiff(cmd.OutOrStdout(), f, fleetYAML, entries)
			})
		},
	}
	cmd.Flags().StringVar(&bundleName, "bundle", "", "only this bundle")
	cmd.Flags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.Flags().BoolVar(&fleetYAML, "fleet-yaml", false, "print a fleet.yaml diff.comparePatches section that ignores the differences shown")
	return cmd
}

// driftEntry is one deployment with drifted objects, as `flotilla diff
// -o json` lists it.
type driftEntry struct {
	Bundle         string                  `json:"bundle"`
	Cluster        string                  `json:"cluster"`
	Release        string                  `json:"release"`
	Namespace      string                  `json:"namespace"`
	DeploymentID   string                  `json:"deploymentID"`
	ModifiedStatus []status.ModifiedStatus `json:"modifiedStatus"`
	// Incomplete: the cluster found more drifted objects than it listed.
	Incomplete bool `json:"incomplete,omitempty"`
}

// driftEntries returns the deployments of deps that list drifted objects,
// sorted by bundle and cluster; a non-empty bundleName or clusterName keeps
// only that bundle or cluster. It never returns nil, so JSON shows [].
func driftEntries(deps []status.Deployment, bundleName, clusterName string) []driftEntry {
	deps = slices.Clone(deps)
	status.Sort(deps)
	entries := []driftEntry{}
	for _, d := range deps {
		if !drifted(d) || (bundleName != "" && d.Bundle != bundleName) || (clusterName != "" && d.Cluster != clusterName) {
			continue
		}
		entries = append(entries, driftEntry{Bundle: d.Bundle, Cluster: d.Cluster, Release: d.Release,
			Namespace: d.Namespace, DeploymentID: d.DeploymentID, ModifiedStatus: d.ModifiedStatus, Incomplete: d.Incomplete})
	}
	return entries
}

// drifted reports whether the deployment lists drifted objects.
func drifted(d status.Deployment) bool { return len(d.ModifiedStatus) > 0 || d.Incomplete }

// printDiff prints the entries: as a fleet.yaml snippet with fleetYAML,
// else as JSON or YAML, else for people; "no drift" when there are none
// (except in JSON and YAML, which show an empty list).
func printDiff(w io.Writer, f output.Format, fleetYAML bool, entries []driftEntry) error {
	if !fleetYAML && f != output.Table {
		return output.Print(w, f, entries, output.Rows{})
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no drift")
		return err
	}
	if fleetYAML {
		return writeFleetYAML(w, entries)
	}
	return writeDiff(w, entries)
}

// writeDiff writes each entry under a "# bundle B on cluster C (release
// ns/name, deploymentID)" header: per object a line "Kind ns/name:" with
// "missing" or "orphaned", or followed by its patch as indented JSON, and
// a conflict when there is one; entries are separated by blank lines.
func writeDiff(w io.Writer, entries []driftEntry) error {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# bundle %s on cluster %s (release %s/%s, %s)\n", e.Bundle, e.Cluster, e.Namespace, e.Release, e.DeploymentID)
		for _, m := range e.ModifiedStatus {
			b.WriteString(m.Object() + ":")
			switch {
			case m.Missing:
				b.WriteString(" missing")
			case m.Delete:
				b.WriteString(" orphaned")
			}
			if m.Conflict != "" {
				b.WriteString(" (conflict: " + m.Conflict + ")")
			}
			b.WriteString("\n")
			if !m.Missing && !m.Delete {
				b.WriteString(prettyPatch(m.Patch, "  ") + "\n")
			}
		}
		if e.Incomplete {
			b.WriteString("... (more)\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// prettyPatch returns the JSON patch indented by two spaces per level,
// every line prefixed with prefix; a patch that is not JSON comes back as
// it is, after the prefix.
func prettyPatch(patch, prefix string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(patch), prefix, "  "); err != nil {
		return prefix + patch
	}
	return prefix + buf.String()
}

// comparePatches builds the fleet.yaml diff.comparePatches that make
// drift detection ignore what the entries show: one entry per object,
// sorted, removing the JSON pointer of every leaf its patches change, or
// ignoring the whole object when it is missing or orphaned anywhere, or
// when a patch has no leaf to point at (not a JSON object, or empty).
func comparePatches(entries []driftEntry) []bundle.ComparePatch {
	objects := map[string]*ignoredObject{}
	for _, e := range entries {
		for _, m := range e.ModifiedStatus {
			key := strings.Join([]string{m.APIVersion, m.Kind, m.Namespace, m.Name}, "\x00")
			if objects[key] == nil {
				objects[key] = &ignoredObject{patch: bundle.ComparePatch{APIVersion: m.APIVersion, Kind: m.Kind,
					Namespace: m.Namespace, Name: m.Name}, paths: map[string]bool{}}
			}
			objects[key].add(m)
		}
	}
	patches := make([]bundle.ComparePatch, 0, len(objects))
	for _, k := range slices.Sorted(maps.Keys(objects)) {
		patches = append(patches, objects[k].comparePatch())
	}
	return patches
}

// ignoredObject gathers what a comparePatch of one object ignores.
type ignoredObject struct {
	patch  bundle.ComparePatch
	ignore bool
	paths  map[string]bool
}

func (o *ignoredObject) add(m status.ModifiedStatus) {
	pointers := leafPointers(m.Patch)
	if m.Missing || m.Delete || len(pointers) == 0 {
		o.ignore = true
	}
	for _, p := range pointers {
		o.paths[p] = true
	}
}

func (o *ignoredObject) comparePatch() bundle.ComparePatch {
	p := o.patch
	if o.ignore {
		p.Operations = []bundle.Operation{{Op: "ignore"}}
		return p
	}
	for _, path := range slices.Sorted(maps.Keys(o.paths)) {
		p.Operations = append(p.Operations, bundle.Operation{Op: "remove", Path: path})
	}
	return p
}

// leafPointers returns, sorted, the JSON pointers (RFC 6901) of the leaves
// of a JSON merge patch: the values that are not objects, or are empty
// objects. Arrays are leaves, as a merge patch replaces them whole. A patch
// that is not a JSON object has none.
func leafPointers(patch string) []string {
	var doc map[string]any
	if err := json.Unmarshal([]byte(patch), &doc); err != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + "/" + escapePointer(k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p, sub)
				continue
			}
			out = append(out, p)
		}
	}
	walk("", doc)
	sort.Strings(out)
	return out
}

// escapePointer escapes a key for a JSON pointer: "~" as "~0", "/" as "~1".
func escapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// writeFleetYAML writes a fleet.yaml snippet, diff.comparePatches, that
// ignores the entries' differences.
func writeFleetYAML(w io.Writer, entries []driftEntry) error {
	snippet := struct {
		Diff bundle.DiffOptions `json:"diff"`
	}{Diff: bundle.DiffOptions{ComparePatches: comparePatches(entries)}}
	b, err := yaml.Marshal(snippet)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// printDrift writes the status's Drift section: per deployment that lists
// drifted objects, its counts and each object and how it differs, and
// "... (more)" where the cluster listed only some. It writes nothing when
// no deployment lists any.
func printDrift(w io.Writer, st status.GitRepo) {
	deps := slices.DeleteFunc(slices.Clone(st.Deployments), func(d status.Deployment) bool { return !drifted(d) })
	if len(deps) == 0 {
		return
	}
	status.Sort(deps)
	rc := st.ResourceCounts
	fmt.Fprintf(w, "\nDrift: %d modified, %d missing, %d orphaned resources\n", rc.Modified, rc.Missing, rc.Orphaned)
	for _, d := range deps {
		fmt.Fprintf(w, "  bundle %s on cluster %s (release %s/%s): %s\n", d.Bundle, d.Cluster, d.Namespace, d.Release, driftCounts(d))
		for _, m := range d.ModifiedStatus {
			fmt.Fprintf(w, "    %s\n", m.String())
		}
		if d.Incomplete {
			fmt.Fprintln(w, "    ... (more)")
		}
	}
}

// driftCounts says how many of the deployment's objects drifted and how
// often drift was corrected: "1 modified, 2 orphaned, 3 corrections".
func driftCounts(d status.Deployment) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{d.Modified, "modified"}, {d.Missing, "missing"}, {d.Orphaned, "orphaned"}, {d.Corrections, "corrections"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d listed", len(d.ModifiedStatus))
	}
	return strings.Join(parts, ", ")
}
