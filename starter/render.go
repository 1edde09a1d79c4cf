package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
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
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// renderFlags are the flags of `flotilla render`.
type renderFlags struct {
	name, clusterName, clusterNamespace, kubeVersion, chartCache string
	labels, annotations, values, groups, mirrors, paths          []string
	// groupLabels are --cluster-group-label NAME:k=v.
	groupLabels []string
	// gitRepoFile and groupsFile are --gitrepo and --groups.
	gitRepoFile, groupsFile string
	bundles, strict         bool
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

Without --gitrepo, a bundle's own targets and targetCustomizations decide whether the
cluster gets it, as with Fleet's "fleet test". --gitrepo FILE (a GitRepo document, as
"flotilla apply" takes it) renders as that GitRepo's rollout would: its targets select
the cluster (clusterGroup "default" when it has none), its paths are scanned, its name
prefixes bundle names, its namespace is .ClusterNamespace, and its targetNamespace, serviceAccount,
keepResources, deleteNamespace, forceSyncGeneration and correctDrift apply to every bundle.

The cluster's groups are the --cluster-group names (--cluster-group-label NAME:k=v gives
group NAME a label, for clusterGroupSelector) and the ClusterGroups of --groups FILE whose
selector selects the cluster's labels (their metadata.labels are the group's labels). With
no --cluster-label, no --cluster-group and no --groups the cluster is a member of the
ClusterGroup "default", which is where a bundle without targets goes.

What reading the bundles ignored, as Fleet ignores it (fleet.yaml keys Fleet does not
define, raw YAML files with a document that is not an object), is printed on stderr as
"Warning: ..."; --strict makes any warning an error, for linting a repository in CI.`,
		Example: `  flotilla render ./repo
  flotilla render ./multi-cluster/helm --cluster-label env=prod
  flotilla render . --bundles --cluster-name eu-1 --cluster-value region=eu
  flotilla render ./repo --gitrepo gitrepo.yaml --groups groups.yaml --cluster-label env=prod
  flotilla render ./repo --cluster-group edge --cluster-group-label edge:tier=gold
  flotilla render ./repo --strict > /dev/null   # lint: fail on any warning`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runRender(cmd, g, f, args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.name, "name", "", "bundle name prefix, as a GitRepo's name (default: the --gitrepo's name, else the directory name of PATH)")
	fs.StringVar(&f.clusterNamespace, "namespace", api.DefaultNamespace, "namespace of the GitRepo and the simulated cluster (.ClusterNamespace; default: the --gitrepo's)")
	fs.StringVar(&f.clusterName, "cluster-name", "local", "name of the simulated cluster (.ClusterName)")
	fs.StringArrayVar(&f.labels, "cluster-label", nil, "label k=v of the simulated cluster (repeatable; .ClusterLabels)")
	fs.StringArrayVar(&f.annotations, "cluster-annotation", nil, "annotation k=v of the simulated cluster (repeatable; .ClusterAnnotations)")
	fs.StringArrayVar(&f.groups, "cluster-group", nil, "ClusterGroup the simulated cluster belongs to (repeatable)")
	fs.StringArrayVar(&f.groupLabels, "cluster-group-label", nil, "label k=v of a group the cluster belongs to, as NAME:k=v (repeatable; matched by clusterGroupSelector)")
	fs.StringVar(&f.groupsFile, "groups", "", "YAML file of ClusterGroups: the cluster is in each whose selector selects its labels (other kinds are ignored)")
	fs.StringVar(&f.gitRepoFile, "gitrepo", "", "YAML file holding one GitRepo: render as its rollout would (targets, paths, name, namespace, targetNamespace and serviceAccount, which bind every bundle, keepResources, deleteNamespace, forceSyncGeneration, correctDrift; other kinds are ignored)")
	fs.BoolVar(&f.strict, "strict", false, "fail when there is any warning (unknown fleet.yaml keys, skipped raw YAML files, unknown fields in --gitrepo/--groups)")
	fs.StringArrayVar(&f.values, "cluster-value", nil, "template value k=v of the simulated cluster (repeatable; .ClusterValues, v parsed as YAML)")
	fs.StringArrayVar(&f.paths, "paths", nil, "scan only these paths (globs) under PATH, as GitRepo spec.paths (repeatable; overrides the --gitrepo's)")
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

// cluster is the simulated cluster; fileGroups are the --groups file's
// ClusterGroups.
func (f renderFlags) cluster(fileGroups []target.Group) (bundle.Cluster, error) {
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
	c.Groups, err = f.clusterGroups(labels, fileGroups)
	return c, err
}

// clusterGroups returns the groups of a cluster with these labels: the
// --cluster-group names, then the --groups file's groups that select it
// (target.Memberships, as a rollout finds them), or "default" when no
// flag says anything about groups or labels; --cluster-group-label then
// labels them.
func (f renderFlags) clusterGroups(labels map[string]string, fileGroups []target.Group) ([]bundle.Group, error) {
	var groups []bundle.Group
	index := map[string]int{}
	add := func(g bundle.Group) {
		if i, ok := index[g.Name]; ok {
			groups[i].Labels = mergeLabels(groups[i].Labels, g.Labels)
			return
		}
		index[g.Name] = len(groups)
		groups = append(groups, bundle.Group{Name: g.Name, Labels: maps.Clone(g.Labels)})
	}
	for _, name := range f.groups {
		add(bundle.Group{Name: name})
	}
	member, err := target.Memberships(labels, fileGroups)
	if err != nil {
		return nil, fmt.Errorf("--groups %s: %w", f.groupsFile, err)
	}
	for _, g := range member {
		add(g)
	}
	if len(f.groups) == 0 && len(labels) == 0 && f.groupsFile == "" {
		add(bundle.Group{Name: api.DefaultClusterGroup})
	}
	for _, gl := range f.groupLabels {
		name, kv, ok := strings.Cut(gl, ":")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || name == "" || k == "" {
			return nil, fmt.Errorf("--cluster-group-label %q: want GROUP:key=value", gl)
		}
		if errs := api.ValidateLabels(map[string]string{k: v}, field.NewPath("--cluster-group-label")); len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("--cluster-group-label %q: the cluster is not in group %s (add --cluster-group %s)", gl, name, name)
		}
		groups[i].Labels = mergeLabels(groups[i].Labels, map[string]string{k: v})
	}
	return groups, nil
}

// mergeLabels returns a copy of base with add's labels set.
func mergeLabels(base, add map[string]string) map[string]string {
	if len(add) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// gitRepo decodes --gitrepo: the file must hold exactly one GitRepo. It
// returns nil without the flag, and the decoder's warnings.
func (f renderFlags) gitRepo(stdin io.Reader) (*api.GitRepo, []string, error) {
	if f.gitRepoFile == "" {
		return nil, nil, nil
	}
	docs, err := decodeFile(stdin, f.gitRepoFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--gitrepo: %w", err)
	}
	var repos []*api.GitRepo
	var warnings []string
	for _, d := range docs {
		if d.GitRepo != nil {
			repos = append(repos, d.GitRepo)
			warnings = append(warnings, d.Warnings...)
		}
	}
	if len(repos) != 1 {
		return nil, nil, fmt.Errorf("--gitrepo %s: holds %d GitRepos; want exactly one", f.gitRepoFile, len(repos))
	}
	return repos[0], warnings, nil
}

// fileGroups decodes --groups: every ClusterGroup of the file, with its
// selector and labels. It returns nil without the flag, and the decoder's
// warnings.
func (f renderFlags) fileGroups(stdin io.Reader) ([]target.Group, []string, error) {
	if f.groupsFile == "" {
		return nil, nil, nil
	}
	docs, err := decodeFile(stdin, f.groupsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--groups: %w", err)
	}
	var groups []target.Group
	var warnings []string
	for _, d := range docs {
		if cg := d.ClusterGroup; cg != nil {
			groups = append(groups, target.Group{Name: cg.Metadata.Name, Selector: cg.Spec.Selector, Labels: cg.Metadata.Labels})
			warnings = append(warnings, d.Warnings...)
		}
	}
	if len(groups) == 0 {
		return nil, nil, fmt.Errorf("--groups %s: holds no ClusterGroup", f.groupsFile)
	}
	return groups, warnings, nil
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
	in, err := f.inputs(cmd, root)
	if err != nil {
		return err
	}
	fetch, err := f.fetcher()
	if err != nil {
		return err
	}
	results, err := render.Dir(cmd.Context(), render.DirOptions{Root: root, Paths: f.paths, RepoName: in.name,
		Reader: &bundle.Reader{Charts: fetch}, Deployer: deployer.New(deployer.Options{}), Cluster: in.cluster,
		GitRepo: in.spec(), KubeVersion: f.kubeVersion})
	if errors.Is(err, bundle.ErrNoBundles) {
		return fmt.Errorf("no bundles under %s", path)
	}
	if err != nil {
		return err
	}
	warnings := in.warnings
	for _, r := range results {
		warnings = append(warnings, r.Bundle.Warnings...)
	}
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "Warning: "+w)
	}
	if f.strict && len(warnings) > 0 {
		return fmt.Errorf("--strict: %d warnings:\n  %s", len(warnings), strings.Join(warnings, "\n  "))
	}
	if f.bundles {
		return printBundles(cmd.OutOrStdout(), format, results)
	}
	deployed, err := printObjects(cmd.OutOrStdout(), results)
	if err != nil {
		return err
	}
	if deployed == 0 {
		c := in.cluster
		return fmt.Errorf("no bundle under %s targets cluster %s (labels %s, groups %s%s)", path, c.Name,
			formatLabels(c.Labels), groupNames(c.Groups), gitRepoTargets(in.repo))
	}
	return nil
}

// renderInputs are what the flags of `flotilla render` describe besides
// the repository.
type renderInputs struct {
	// repo is --gitrepo's GitRepo, or nil.
	repo *api.GitRepo
	// name prefixes bundle names.
	name    string
	cluster bundle.Cluster
	// warnings are the --gitrepo and --groups files' unknown fields.
	warnings []string
}

func (in renderInputs) spec() *api.GitRepoSpec {
	if in.repo == nil {
		return nil
	}
	return &in.repo.Spec
}

// inputs reads --gitrepo and --groups and builds the simulated cluster;
// root is the repository's absolute path.
func (f renderFlags) inputs(cmd *cobra.Command, root string) (renderInputs, error) {
	var in renderInputs
	if f.gitRepoFile == "-" && f.groupsFile == "-" {
		return in, errors.New("--gitrepo and --groups cannot both read stdin")
	}
	var err error
	if in.repo, in.warnings, err = f.gitRepo(cmd.InOrStdin()); err != nil {
		return in, err
	}
	groups, groupWarnings, err := f.fileGroups(cmd.InOrStdin())
	if err != nil {
		return in, err
	}
	in.warnings = append(in.warnings, groupWarnings...)
	in.name = f.name
	if in.repo != nil {
		if in.name == "" {
			in.name = in.repo.Metadata.Name
		}
		if !cmd.Flags().Changed("namespace") {
			f.clusterNamespace = in.repo.Metadata.Namespace
		}
	}
	if in.name == "" {
		in.name = filepath.Base(root)
	}
	in.cluster, err = f.cluster(groups)
	return in, err
}

// printObjects prints what the cluster receives, bundle by bundle, and
// returns how many bundles deploy there.
func printObjects(w io.Writer, results []render.Result) (int, error) {
	deployed := 0
	for _, r := range results {
		if !r.Deployment.Deploy {
			continue
		}
		deployed++
		fmt.Fprintf(w, "# Bundle: %s\n", r.Bundle.Name)
		if _, err := w.Write(r.Objects); err != nil {
			return deployed, err
		}
		if len(r.Objects) > 0 && r.Objects[len(r.Objects)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	return deployed, nil
}

// gitRepoTargets describes the targets of --gitrepo for an error message.
func gitRepoTargets(repo *api.GitRepo) string {
	if repo == nil {
		return ""
	}
	if len(repo.Spec.Targets) == 0 {
		return "; GitRepo " + repo.Metadata.Name + " targets clusterGroup " + api.DefaultClusterGroup
	}
	return fmt.Sprintf("; GitRepo %s has %d targets", repo.Metadata.Name, len(repo.Spec.Targets))
}

func groupNames(gs []bundle.Group) string {
	if len(gs) == 0 {
		return "<none>"
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		n := g.Name
		if len(g.Labels) > 0 {
			n += "[" + formatLabels(g.Labels) + "]"
		}
		names = append(names, n)
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
	Warnings     []string `json:"warnings,omitempty"`
}

func printBundles(w io.Writer, f output.Format, results []render.Result) error {
	views := make([]bundleView, 0, len(results))
	rows := output.Rows{Header: []string{"BUNDLE", "PATH", "TYPE", "CHART", "TARGETS", "DEPLOYS", "DEPLOYMENT ID"}}
	for _, r := range results {
		b := r.Bundle
		v := bundleView{Name: b.Name, Path: b.Dir, Type: b.Type, Targets: targetNames(b),
			Deploy: r.Deployment.Deploy, Release: r.Deployment.Release, Namespace: r.Deployment.Namespace,
			DeploymentID: r.Deployment.DeploymentID, Warnings: b.Warnings}
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
