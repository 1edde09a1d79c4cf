package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/chartfetch"
	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/output"
	"github.com/flotilla-gitops/flotilla/internal/render"
)

// renderFlags are the flags of `flotilla render`.
type renderFlags struct {
	name, clusterName, clusterNamespace, kubeVersion, chartCache string
	labels, annotations, values, groups, mirrors, paths          []string
	bundles                                                      bool
}

func newRenderCommand(g *globals) *cobra.Command {
	var f renderFlags
	cmd := &cobra.Command{
		Use:   "render PATH",
		Short: "Print what one cluster would receive from the bundles under PATH, offline",
		Long: `Render reads every bundle under PATH (a checkout of a Git repository: fleet.yaml,
Helm charts, kustomizations, raw YAML), decides which of them target a simulated cluster,
applies its customizations and value templates, and prints the objects Helm would install
there, as one YAML stream with a "# Bundle: <name>" line before each bundle. It needs no
server: it is the rollout's own code path with Helm in client-only mode. Remote charts are
downloaded (and cached); --chart-mirror points their URLs at a mirror.

With no --cluster-label and no --cluster-group the simulated cluster is a member of the
ClusterGroup "default", which is where a bundle without targets goes (as with Fleet's
"fleet test").`,
		Example: `  flotilla render ./repo
  flotilla render ./multi-cluster/helm --cluster-label env=prod
  flotilla render . --bundles --cluster-name eu-1 --cluster-value region=eu`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRender(cmd, g, f, args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.name, "name", "", "bundle name prefix, as a GitRepo's name (default: the directory name of PATH)")
	fs.StringVar(&f.clusterNamespace, "namespace", api.DefaultNamespace, "namespace of the GitRepo and the simulated cluster (.ClusterNamespace)")
	fs.StringVar(&f.clusterName, "cluster-name", "local", "name of the simulated cluster (.ClusterName)")
	fs.StringArrayVar(&f.labels, "cluster-label", nil, "label k=v of the simulated cluster (repeatable; .ClusterLabels)")
	fs.StringArrayVar(&f.annotations, "cluster-annotation", nil, "annotation k=v of the simulated cluster (repeatable; .ClusterAnnotations)")
	fs.StringArrayVar(&f.groups, "cluster-group", nil, "ClusterGroup the simulated cluster belongs to (repeatable)")
	fs.StringArrayVar(&f.values, "cluster-value", nil, "template value k=v of the simulated cluster (repeatable; .ClusterValues, v parsed as YAML)")
	fs.StringArrayVar(&f.paths, "paths", nil, "scan only these paths (globs) under PATH, as GitRepo spec.paths (repeatable)")
	fs.StringVar(&f.kubeVersion, "kube-version", deployer.DefaultKubeVersion, "Kubernetes version for Helm's .Capabilities")
	fs.StringArrayVar(&f.mirrors, "chart-mirror", nil, "fetch remote charts whose URL starts with FROM from TO instead: FROM=TO (repeatable)")
	fs.StringVar(&f.chartCache, "chart-cache", defaultChartCache(), "directory caching downloaded charts")
	fs.BoolVar(&f.bundles, "bundles", false, "list the bundles found (name, type, chart, targets, deployment ID) instead of the objects")
	return cmd
}

// defaultChartCache is ~/.cache/flotilla/charts, or no cache.
func defaultChartCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "flotilla", "charts")
}

func (f renderFlags) cluster() (bundle.Cluster, error) {
	labels, _, err := parseLabels(f.labels, false)
	if err != nil {
		return bundle.Cluster{}, err
	}
	if errs := api.ValidateLabels(labels, field.NewPath("--cluster-label")); len(errs) > 0 {
		return bundle.Cluster{}, errs.ToAggregate()
	}
	annotations, _, err := parseLabels(f.annotations, false)
	if err != nil {
		return bundle.Cluster{}, err
	}
	c := bundle.Cluster{Name: f.clusterName, Namespace: f.clusterNamespace, Labels: labels, Annotations: annotations,
		Values: map[string]any{}}
	for _, kv := range f.values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return c, fmt.Errorf("--cluster-value %q: want key=value", kv)
		}
		var parsed any
		if err := yaml.Unmarshal([]byte(v), &parsed); err != nil {
			parsed = v
		}
		c.Values[k] = parsed
	}
	groups := f.groups
	if len(groups) == 0 && len(labels) == 0 {
		groups = []string{"default"}
	}
	for _, g := range groups {
		c.Groups = append(c.Groups, bundle.Group{Name: g})
	}
	return c, nil
}

func (f renderFlags) fetcher() (*chartfetch.Fetcher, error) {
	mirrors, err := chartfetch.ParseMirrors(f.mirrors)
	if err != nil {
		return nil, err
	}
	return &chartfetch.Fetcher{CacheDir: f.chartCache, Mirrors: mirrors}, nil
}

func runRender(cmd *cobra.Command, g *globals, f renderFlags, path string) error {
	format, err := g.format()
	if err != nil {
		return err
	}
	root, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	c, err := f.cluster()
	if err != nil {
		return err
	}
	fetch, err := f.fetcher()
	if err != nil {
		return err
	}
	name := f.name
	if name == "" {
		name = filepath.Base(root)
	}
	results, err := render.Dir(cmd.Context(), render.DirOptions{Root: root, Paths: f.paths, RepoName: name,
		Reader: &bundle.Reader{Charts: fetch}, Deployer: deployer.New(deployer.Options{}), Cluster: c,
		KubeVersion: f.kubeVersion})
	if errors.Is(err, bundle.ErrNoBundles) {
		return fmt.Errorf("no bundles under %s", path)
	}
	if err != nil {
		return err
	}
	if f.bundles {
		return printBundles(cmd.OutOrStdout(), format, results)
	}
	deployed := 0
	w := cmd.OutOrStdout()
	for _, r := range results {
		if !r.Deployment.Deploy {
			continue
		}
		deployed++
		fmt.Fprintf(w, "# Bundle: %s\n", r.Bundle.Name)
		if _, err := w.Write(r.Objects); err != nil {
			return err
		}
		if len(r.Objects) > 0 && r.Objects[len(r.Objects)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	if deployed == 0 {
		return fmt.Errorf("no bundle under %s targets cluster %s (labels %s, groups %s)", path, c.Name,
			formatLabels(c.Labels), groupNames(c.Groups))
	}
	return nil
}

func groupNames(gs []bundle.Group) string {
	if len(gs) == 0 {
		return "<none>"
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Name)
	}
	return strings.Join(names, ",")
}

// bundleView is one line of `flotilla render --bundles`.
type bundleView struct {
	Name         string   `json:"name"`
	Path         string   `json:"path"`
	Type         string   `json:"type"`
	Chart        string   `json:"chart,omitempty"`
	Targets      []string `json:"targets"`
	Deploy       bool     `json:"deploy"`
	Release      string   `json:"release,omitempty"`
	Namespace    string   `json:"namespace,omitempty"`
	DeploymentID string   `json:"deploymentID,omitempty"`
}

func printBundles(w io.Writer, f output.Format, results []render.Result) error {
	views := make([]bundleView, 0, len(results))
	rows := output.Rows{Header: []string{"BUNDLE", "PATH", "TYPE", "CHART", "TARGETS", "DEPLOYS", "DEPLOYMENT ID"}}
	for _, r := range results {
		b := r.Bundle
		v := bundleView{Name: b.Name, Path: b.Dir, Type: b.Type, Targets: targetNames(b),
			Deploy: r.Deployment.Deploy, Release: r.Deployment.Release, Namespace: r.Deployment.Namespace,
			DeploymentID: r.Deployment.DeploymentID}
		if h := b.Options.Helm; h != nil {
			v.Chart = api.RedactURL(h.Chart)
			if h.Repo != "" {
				v.Chart = api.RedactURL(h.Repo) + " " + h.Chart
			}
			if h.Version != "" {
				v.Chart += " " + h.Version
			}
		}
		views = append(views, v)
		id := v.DeploymentID
		if id == "" {
			id = "-"
		}
		rows.Rows = append(rows.Rows, []string{v.Name, v.Path, v.Type, orDash(v.Chart), strings.Join(v.Targets, ","), fmt.Sprint(v.Deploy), id})
	}
	return output.Print(w, f, views, rows)
}

func targetNames(b bundle.Bundle) []string {
	var out []string
	for _, list := range [][]bundle.Target{b.Spec.TargetCustomizations, b.Spec.Targets} {
		for i, t := range list {
			n := t.Name
			if n == "" {
				n = fmt.Sprintf("#%d", i)
			}
			if t.DoNotDeploy {
				n += "(doNotDeploy)"
			}
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []string{api.DefaultTarget.Name}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
