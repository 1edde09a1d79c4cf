package bundle_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-gitops/flotilla/internal/bundle"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
)

func TestReadRolloutStrategy(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml": `rolloutStrategy:
  maxUnavailable: 10%
  maxUnavailablePartitions: 1
  autoPartitionSize: 50
  autoPartitionThreshold: 100
  maxNew: 20
  failureThreshold: 5%
  rollbackOnFailure: true
  readyTimeoutSeconds: 120
  windows:
  - schedule: "0 2 * * 1-5"
    duration: 2h
    timeZone: Europe/Berlin
  - schedule: "@weekly"
    duration: 90m
  partitions:
  - name: canary
    clusterName: c1
    maxUnavailable: 1
    requireApproval: true
  - clusterGroup: prod
`,
		"app/x.yaml": cm,
	})
	b, _, err := bundle.Read(root, "app", "repo")
	require.NoError(t, err)
	five, ten := intstr.FromString("5%"), intstr.FromString("10%")
	one, fifty := intstr.FromInt32(1), intstr.FromInt32(50)
	hundred, timeout := 100, 120
	assert.Equal(t, &bundle.RolloutStrategy{
		MaxUnavailable:           &ten,
		MaxUnavailablePartitions: &one,
		AutoPartitionSize:        &fifty,
		AutoPartitionThreshold:   &hundred,
		MaxNew:                   20,
		FailureThreshold:         &five,
		RollbackOnFailure:        true,
		ReadyTimeoutSeconds:      &timeout,
		Windows: []bundle.Window{
			{Schedule: "0 2 * * 1-5", Duration: "2h", TimeZone: "Europe/Berlin"},
			{Schedule: "@weekly", Duration: "90m"},
		},
		Partitions: []bundle.Partition{
			{Name: "canary", ClusterName: "c1", MaxUnavailable: &one, RequireApproval: true},
			{ClusterGroup: "prod"},
		},
	}, b.Spec.RolloutStrategy)
}

func TestReadRolloutStrategyErrors(t *testing.T) {
	tests := []struct {
		name     string
		strategy string // the rolloutStrategy block, indented by two spaces
		want     []string
	}{
		{"bad failure threshold", "  failureThreshold: many\n",
			[]string{"app/fleet.yaml: rolloutStrategy.failureThreshold:", `"many" must be a count or a percentage`}},
		{"negative failure threshold", "  failureThreshold: -1\n",
			[]string{"rolloutStrategy.failureThreshold:", "-1 is negative"}},
		{"negative failure threshold percentage", "  failureThreshold: -5%\n",
			[]string{"rolloutStrategy.failureThreshold:", "negative"}},
		{"failure threshold of the wrong type", "  failureThreshold: [1]\n",
			[]string{"failureThreshold"}},
		{"zero ready timeout", "  readyTimeoutSeconds: 0\n",
			[]string{"rolloutStrategy.readyTimeoutSeconds:", "0 must be positive"}},
		{"negative ready timeout", "  readyTimeoutSeconds: -30\n",
			[]string{"rolloutStrategy.readyTimeoutSeconds:", "-30 must be positive"}},
		{"ready timeout not a number", "  readyTimeoutSeconds: soon\n",
			[]string{"rolloutStrategy.readyTimeoutSeconds:", "want an integer"}},
		{"rollbackOnFailure not a bool", "  rollbackOnFailure: sometimes\n",
			[]string{"rolloutStrategy.rollbackOnFailure:", "want true or false"}},
		{"bad cron", "  windows:\n  - schedule: \"0 25 * * *\"\n    duration: 1h\n",
			[]string{"app/fleet.yaml: rolloutStrategy.windows[0].schedule:", `"0 25 * * *"`, "above maximum"}},
		{"six cron fields", "  windows:\n  - schedule: \"0 0 2 * * *\"\n    duration: 1h\n",
			[]string{"rolloutStrategy.windows[0].schedule:", "expected exactly 5 fields"}},
		{"second window bad", "  windows:\n  - schedule: \"@daily\"\n    duration: 1h\n  - schedule: \"@sometimes\"\n    duration: 1h\n",
			[]string{"rolloutStrategy.windows[1].schedule:", "@sometimes"}},
		{"missing schedule", "  windows:\n  - duration: 1h\n",
			[]string{"rolloutStrategy.windows[0].schedule:", "is required"}},
		{"@every", "  windows:\n  - schedule: \"@every 1h\"\n    duration: 10m\n",
			[]string{"rolloutStrategy.windows[0].schedule:", "@every is not supported"}},
		{"time zone in the schedule", "  windows:\n  - schedule: \"CRON_TZ=Europe/Berlin 0 2 * * *\"\n    duration: 1h\n",
			[]string{"rolloutStrategy.windows[0].schedule:", "timeZone"}},
		{"bad duration", "  windows:\n  - schedule: \"@daily\"\n    duration: two hours\n",
			[]string{"rolloutStrategy.windows[0].duration:", "invalid duration"}},
		{"duration without unit", "  windows:\n  - schedule: \"@daily\"\n    duration: \"2\"\n",
			[]string{"rolloutStrategy.windows[0].duration:", "missing unit"}},
		{"zero duration", "  windows:\n  - schedule: \"@daily\"\n    duration: 0s\n",
			[]string{"rolloutStrategy.windows[0].duration:", `"0s" must be positive`}},
		{"negative duration", "  windows:\n  - schedule: \"@daily\"\n    duration: -1h\n",
			[]string{"rolloutStrategy.windows[0].duration:", "must be positive"}},
		{"missing duration", "  windows:\n  - schedule: \"@daily\"\n",
			[]string{"rolloutStrategy.windows[0].duration:", "is required"}},
		{"unknown time zone", "  windows:\n  - schedule: \"@daily\"\n    duration: 1h\n    timeZone: Mars/Olympus\n",
			[]string{"rolloutStrategy.windows[0].timeZone:", `"Mars/Olympus" is not a known time zone`}},
		{"local time zone", "  windows:\n  - schedule: \"@daily\"\n    duration: 1h\n    timeZone: Local\n",
			[]string{"rolloutStrategy.windows[0].timeZone:", "IANA"}},
		{"requireApproval not a bool", "  partitions:\n  - clusterName: a\n    requireApproval: please\n",
			[]string{"rolloutStrategy.partitions.requireApproval:", "want true or false"}},
		{"duplicate partition names", "  partitions:\n  - name: a\n    clusterName: one\n  - name: a\n    clusterName: two\n",
			[]string{"rolloutStrategy.partitions[1].name:", `"a" is also the name of partitions[0]`}},
		{"name of an unnamed partition", "  partitions:\n  - clusterName: one\n  - name: partition-0\n    clusterName: two\n",
			[]string{"rolloutStrategy.partitions[1].name:", `"partition-0" is also the name of partitions[0]`}},
		{"reserved partition name", "  partitions:\n  - name: unpartitioned\n    clusterName: x\n",
			[]string{"rolloutStrategy.partitions[0].name:", "reserved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, map[string]string{"app/fleet.yaml": "rolloutStrategy:\n" + tt.strategy, "app/x.yaml": cm})
			_, _, err := bundle.Read(root, "app", "repo")
			requireValidationError(t, err, append([]string{"bundle repo-app"}, tt.want...)...)
		})
	}
}

func TestWindowParse(t *testing.T) {
	// The schedule is read in the time zone: 09:00 in Kolkata is 03:30 UTC.
	p, err := bundle.Window{Schedule: "0 9 * * *", Duration: "90m", TimeZone: "Asia/Kolkata"}.Parse()
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, p.Duration)
	assert.Equal(t, "Asia/Kolkata", p.Location.String())
	from := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 3, 10, 3, 30, 0, 0, time.UTC), p.Schedule.Next(from.In(p.Location)).UTC())

	p, err = bundle.Window{Schedule: "@daily", Duration: "1h"}.Parse()
	require.NoError(t, err)
	assert.Equal(t, time.UTC, p.Location, "default zone")
	assert.Equal(t, time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), p.Schedule.Next(from.In(p.Location)))

	_, err = bundle.Window{Schedule: "@daily", Duration: "1h", TimeZone: "Nowhere/Land"}.Parse()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `timeZone: "Nowhere/Land" is not a known time zone`)
}

func TestPartitionName(t *testing.T) {
	assert.Equal(t, "canary", fleetyaml.PartitionName(3, bundle.Partition{Name: "canary"}))
	assert.Equal(t, "partition-3", fleetyaml.PartitionName(3, bundle.Partition{ClusterName: "x"}))
}
