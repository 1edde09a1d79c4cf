package fleetyaml_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/outcome"
)

// maxFuzzInput bounds the fleet.yaml text one iteration evaluates, so
// each stays cheap.
const maxFuzzInput = 64 << 10

// templateSeeds are value templates of the templating tests: those that
// render and those refused for their syntax or a missing key.
var templateSeeds = []string{
	`${ .ClusterName }`, `${ index .ClusterLabels "env" }`, `${ .ClusterValues.region | upper }`,
	`${ get .ClusterAnnotations "a" }`, `pre-${ .ClusterName }-post`, `${ .ClusterValues.replicas }`,
	`${ .ClusterValues.nested | toJson }`, `${ get .ClusterLabels "nope" | default "fallback" }`,
	`${ hasKey .ClusterLabels "objectset.rio.cattle.io/hash" }`, `${ .ClusterLabels.missing }`,
	`${ .ClusterName`, `${ "[" }`, `${ env "HOME" }`, `${ toYaml .ClusterValues }`,
	`${ range $i := until 50 }${ printf "h%d.%s," $i $.ClusterName }${ end }`, `${ repeat 3 "ab" }`,
	`global.fleet.clusterLabels.env`,
}

// budgetSeeds are templates of the budget tests refused for memory or
// template calls. (Those that run out of time or nearly fill the output
// budget are left out: each takes seconds in an instrumented fuzz worker,
// and the fuzzer would spend its iterations on their mutations.)
var budgetSeeds = []string{
	`${ repeat 2000000000 "x" }`, `${ repeat 1000 "x" | repeat 1000 | repeat 1000 }`,
	`${ indent 2000000000 "x" }`, `${ until 1000000000 | len }`, `${ seq 1 1000000000 }`,
	`${ replace "" (repeat 100000 "y") (repeat 100000 "z") }`, `${ join (repeat 1000000 "s") (until 1000) }`,
	`${ printf "%999999d%999999d" 1 2 }`,
	`${ define "a" }${ template "a" }${ end }${ template "a" }`,
}

// nondeterministic matches the sprig functions whose result changes from
// call to call (time, randomness, keys, encryption with a random IV).
var nondeterministic = regexp.MustCompile(`now|date|ago|rand|uuid|shuffle|gen|htpasswd|bcrypt|encrypt|Time|unix`)

// slowest is how long one ProcessValues may take in a fuzz worker. The
// time budget bounds the templates' execution; parsing what they wrote (up
// to DefaultTemplateOutput of YAML) comes on top, and coverage-instrumented
// code on a loaded 2-core machine runs several times slower: 3 MB of
// output took 3.3 s there. A template escaping its budget runs far longer.
const slowest = 3 * fleetyaml.DefaultTemplateTime

// FuzzProcessValues: for any helm values and templateValues of fleet.yaml,
// ProcessValues returns within (a margin over) its time budget, leaves
// its input alone, fails only with an error naming helm.values or the
// templateValues key (a budget error classed Invalid), and otherwise gives
// values that encode to JSON within the budget's size, the same on every
// call unless the templates use time or randomness.
func FuzzProcessValues(f *testing.F) {
	for _, s := range templateSeeds {
		f.Add([]byte("v: '"+strings.ReplaceAll(s, "'", "''")+"'\n"), s, "dev")
		f.Add([]byte("a:\n  b:\n  - fine\n  - "+s+"\n"), "${ .ClusterName }", "")
	}
	for _, s := range budgetSeeds {
		f.Add([]byte("v: 1\n"), s, "dev")
	}
	f.Add([]byte("v:\n  ${ .ClusterName }-key: 1\n  ${ .ClusterLabels.env }:\n    x: z\n"), "", "prod")
	f.Add([]byte("a: &a [x, x, x, x]\nb: [*a, *a, *a, *a]\n"), "[*a]", "x")
	f.Fuzz(func(t *testing.T, values []byte, templateValue, label string) {
		if len(values)+len(templateValue) > maxFuzzInput {
			t.Skip()
		}
		var v map[string]any
		if yaml.Unmarshal(values, &v) != nil {
			t.Skip()
		}
		opts := fleetyaml.Options{Helm: &fleetyaml.HelmOptions{Values: v, TemplateValues: map[string]string{"tv": templateValue}}}
		c := templateCluster()
		c.Labels["fuzz"] = label
		before, err := json.Marshal(opts)
		if err != nil {
			t.Skip() // values YAML can hold what JSON cannot (NaN)
		}
		start := time.Now()
		got, err := fleetyaml.ProcessValues(opts, c)
		if elapsed := time.Since(start); elapsed > slowest {
			t.Fatalf("ProcessValues took %s; its templates have a time budget of %s", elapsed, fleetyaml.DefaultTemplateTime)
		}
		if after, _ := json.Marshal(opts); !bytes.Equal(before, after) {
			t.Fatalf("ProcessValues modified its input\nbefore %s\nafter  %s", before, after)
		}
		if err != nil {
			checkValuesError(t, err)
			return
		}
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("result does not encode: %v", err)
		}
		if int64(len(out)) > fleetyaml.DefaultTemplateAlloc {
			t.Fatalf("result of %d bytes, over the template budget", len(out))
		}
		if nondeterministic.Match(values) || nondeterministic.MatchString(templateValue) {
			return
		}
		again, err := fleetyaml.ProcessValues(opts, c)
		if err != nil {
			t.Fatalf("second call failed: %v", err)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("two calls differ\n%s\n%s", out, out2)
		}
	})
}

// checkValuesError holds an error of ProcessValues to its contract.
func checkValuesError(t *testing.T, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "helm.values") && !strings.HasPrefix(err.Error(), "helm.templateValues.tv: ") {
		t.Fatalf("error %q names neither helm.values nor the templateValues key", err)
	}
	var be *fleetyaml.TemplateBudgetError
	if errors.As(err, &be) && be.Class() != outcome.Invalid {
		t.Fatalf("budget error %v has class %q, want Invalid", err, be.Class())
	}
}

// mergeSeeds are deployment options as fleet.yaml and its target
// customizations write them.
var mergeSeeds = []string{
	"",
	"defaultNamespace: a\nnamespace: b\nserviceAccount: sa\n",
	"helm:\n  chart: c\n  repo: https://r\n  version: 1.0.0\n  releaseName: r\n  values: {a: 1, m: {x: 1, y: [1, 2]}}\n  templateValues: {t: '${ .ClusterName }'}\n  force: true\n  timeoutSeconds: 30\n",
	"helm:\n  values: {m: {y: z}, b: null}\n  valuesFrom: [{configMapKeyRef: {name: cm, key: k}}, {secretKeyRef: {name: s}}]\n  timeoutSeconds: -1\n",
	"namespaceLabels: {a: b}\nnamespaceAnnotations: {c: d}\nyaml: {overlays: [dev]}\nkustomize: {dir: k}\n",
	"diff: {comparePatches: [{apiVersion: v1, kind: ConfigMap, name: x, operations: [{op: remove, path: /data}]}]}\ndownstreamResources: [{kind: Secret, name: s}, {kind: secret, name: s}]\n",
	"correctDrift: {enabled: true, force: true}\nhelm: {}\nkustomize: {}\n",
}

// FuzzMergeOptions: MergeOptions leaves its arguments alone, changes
// nothing with an empty customization, lets a customization's namespaces
// and service account win, and is a function of its arguments: the same
// inputs give the same deployment ID.
func FuzzMergeOptions(f *testing.F) {
	for _, b := range mergeSeeds {
		for _, c := range mergeSeeds {
			f.Add([]byte(b), []byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, baseYAML, customYAML []byte) {
		if len(baseYAML)+len(customYAML) > maxFuzzInput {
			t.Skip()
		}
		var base, custom fleetyaml.Options
		if yaml.Unmarshal(baseYAML, &base) != nil || yaml.Unmarshal(customYAML, &custom) != nil {
			t.Skip()
		}
		b0, err1 := json.Marshal(base)
		c0, err2 := json.Marshal(custom)
		if err1 != nil || err2 != nil {
			t.Skip()
		}
		out := fleetyaml.MergeOptions(base, custom)
		if b1, _ := json.Marshal(base); !bytes.Equal(b0, b1) {
			t.Fatalf("base modified\nbefore %s\nafter  %s", b0, b1)
		}
		if c1, _ := json.Marshal(custom); !bytes.Equal(c0, c1) {
			t.Fatalf("customization modified\nbefore %s\nafter  %s", c0, c1)
		}
		for _, s := range []struct{ name, got, custom string }{
			{"defaultNamespace", out.DefaultNamespace, custom.DefaultNamespace},
			{"namespace", out.TargetNamespace, custom.TargetNamespace},
			{"serviceAccount", out.ServiceAccount, custom.ServiceAccount},
		} {
			if s.custom != "" && s.got != s.custom {
				t.Fatalf("%s: merged %q, customization says %q", s.name, s.got, s.custom)
			}
		}
		if same := fleetyaml.MergeOptions(base, fleetyaml.Options{}); same.Hash() != base.Hash() {
			t.Fatalf("an empty customization changed the options\n%s", b0)
		}
		if again := fleetyaml.MergeOptions(base, custom); fleetyaml.DeploymentID("m", again) != fleetyaml.DeploymentID("m", out) {
			t.Fatal("the same merge gave two deployment IDs")
		}
	})
}

// FuzzWindow: a rollout window Parse accepts has a positive duration, a
// zone, and a schedule whose next opening is later than the time asked
// (or never); Parse and ParseKey agree, and a refusal names the key.
func FuzzWindow(f *testing.F) {
	for _, w := range []fleetyaml.Window{
		{Schedule: "0 2 * * *", Duration: "1h", TimeZone: "Europe/Berlin"},
		{Schedule: "@daily", Duration: "90m"},
		{Schedule: "0 22 * * 1-5", Duration: "6h", TimeZone: "America/New_York"},
		{Schedule: "0 0 30 2 *", Duration: "1s"},
		{Schedule: "TZ=UTC 0 * * * *", Duration: "1h"},
		{Schedule: "@every 1h", Duration: "1h"},
		{Schedule: "* * * * *", Duration: "-1h", TimeZone: "Local"},
	} {
		f.Add(w.Schedule, w.Duration, w.TimeZone)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, schedule, duration, zone string) {
		w := fleetyaml.Window{Schedule: schedule, Duration: duration, TimeZone: zone}
		p, key, err := w.ParseKey()
		_, perr := w.Parse()
		if (err == nil) != (perr == nil) {
			t.Fatalf("ParseKey %v, Parse %v", err, perr)
		}
		if err != nil {
			if key != "schedule" && key != "duration" && key != "timeZone" {
				t.Fatalf("error %v names key %q", err, key)
			}
			return
		}
		if p.Duration <= 0 || p.Location == nil || p.Schedule == nil {
			t.Fatalf("accepted %s as %+v", w, p)
		}
		if next := p.Schedule.Next(now.In(p.Location)); !next.IsZero() && !next.After(now) {
			t.Fatalf("%s: next opening %s is not after %s", w, next, now)
		}
	})
}
