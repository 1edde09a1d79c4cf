package fleetyaml

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// Time zones of rollout windows resolve on machines without zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// Spec is what fleet.yaml says about a bundle besides its deployment
// Options: where it goes, how it rolls out, what it waits for. It is a
// plain JSON value, stored with the bundle.
type Spec struct {
	// Paused holds every cluster at the deployment it runs.
	Paused bool `json:"paused,omitempty"`
	// RolloutStrategy limits how many clusters change at once.
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`
	// Targets are fleet.yaml's targets. Since a GitRepo always supplies
	// targets (clusterGroup default when it names none), they act as
	// customizations, as in Fleet.
	Targets []Target `json:"targets,omitempty"`
	// TargetCustomizations adjust options per cluster; doNotDeploy skips
	// the matched clusters.
	TargetCustomizations []Target `json:"targetCustomizations,omitempty"`
	// TargetCustomizationMode is FirstMatch (default) or AllMatches.
	TargetCustomizationMode string `json:"targetCustomizationMode,omitempty"`
	// OverrideTargets replace the GitRepo's targets for this bundle.
	OverrideTargets []api.TargetSelector `json:"overrideTargets,omitempty"`
	// DependsOn lists bundles that must be in an accepted state on a
	// cluster before this bundle deploys there.
	DependsOn []BundleRef `json:"dependsOn,omitempty"`
}

// Target modes.
const (
	FirstMatch = "FirstMatch"
	AllMatches = "AllMatches"
)

// Target is a fleet.yaml target or target customization: a selector plus
// options that override the bundle's on the clusters it selects.
type Target struct {
	api.TargetSelector `json:",inline"`
	// DoNotDeploy keeps the bundle off the selected clusters.
	DoNotDeploy bool `json:"doNotDeploy,omitempty"`
	Options     `json:",inline"`
}

// RolloutStrategy is Fleet's rollout strategy. Percentages are of the
// targeted clusters. The fields after Partitions go beyond Fleet; Fleet
// itself would reject a fleet.yaml that sets them.
type RolloutStrategy struct {
	MaxUnavailable           *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	MaxUnavailablePartitions *intstr.IntOrString `json:"maxUnavailablePartitions,omitempty"`
	AutoPartitionSize        *intstr.IntOrString `json:"autoPartitionSize,omitempty"`
	AutoPartitionThreshold   *int                `json:"autoPartitionThreshold,omitempty"`
	MaxNew                   int                 `json:"maxNew,omitempty"`
	Partitions               []Partition         `json:"partitions,omitempty"`

	// FailureThreshold is a count or a percentage of the bundle's targeted
	// clusters: when more clusters than this end ErrApplied, or NotReady
	// past the ready timeout, the rollout halts. Unset, failures never
	// halt it; 0 halts it at the first failure.
	FailureThreshold *intstr.IntOrString `json:"failureThreshold,omitempty"`
	// RollbackOnFailure returns the clusters the halted rollout already
	// updated to their previous deployment.
	RollbackOnFailure bool `json:"rollbackOnFailure,omitempty"`
	// ReadyTimeoutSeconds is how long a cluster may stay NotReady after it
	// was deployed before it counts as failed; default 300.
	ReadyTimeoutSeconds *int `json:"readyTimeoutSeconds,omitempty"`
	// Windows are the times partitions may start in. Without windows a
	// partition may start at any time; with several, inside any of them.
	// A partition that started keeps going when its window closes.
	Windows []Window `json:"windows,omitempty"`
}

// Partition is one manually defined group of clusters of a rollout.
type Partition struct {
	Name                 string                `json:"name,omitempty"`
	MaxUnavailable       *intstr.IntOrString   `json:"maxUnavailable,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
	// RequireApproval holds the partition until it is approved (beyond
	// Fleet).
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// UnpartitionedName names the partition of the clusters that no manual
// partition selects. No manual partition may have this name.
const UnpartitionedName = "unpartitioned"

// PartitionName is the name of the manual partition p at index i of
// rolloutStrategy.partitions: its name, or "partition-<i>" when it has
// none.
func PartitionName(i int, p Partition) string {
	if p.Name != "" {
		return p.Name
	}
	return fmt.Sprintf("partition-%d", i)
}

// Window is a recurring period in which rollout partitions may start: it
// opens at every activation of Schedule and stays open for Duration.
type Window struct {
	// Schedule is a standard five-field cron expression (minute, hour,
	// day of month, month, day of week) or a descriptor such as @daily or
	// @weekly, read in TimeZone. @every and a TZ=/CRON_TZ= prefix are
	// not accepted: use timeZone.
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open, a Go duration such as
	// "2h" or "90m"; it must be positive.
	Duration string `json:"duration"`
	// TimeZone is the IANA name of the zone Schedule is read in, such as
	// "Europe/Berlin"; default UTC.
	TimeZone string `json:"timeZone,omitempty"`
}

// String names the window as fleet.yaml gives it, its zone spelled out:
// `"0 22 * * 1-5" (6h, Europe/Berlin)`.
func (w Window) String() string {
	zone := w.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return fmt.Sprintf("%q (%s, %s)", w.Schedule, w.Duration, zone)
}

// ParsedWindow is a Window with its fields parsed.
type ParsedWindow struct {
	// Schedule yields the times the window opens; call Next with a time
	// in Location.
	Schedule cron.Schedule
	Location *time.Location
	Duration time.Duration
}

// Parse checks w and parses its fields. An error names the key at fault,
// e.g. "schedule: ...".
func (w Window) Parse() (ParsedWindow, error) {
	p, key, err := w.ParseKey()
	if err != nil {
		return ParsedWindow{}, fmt.Errorf("%s: %w", key, err)
	}
	return p, nil
}

// ParseKey is Parse, returning the key at fault apart from the error.
func (w Window) ParseKey() (ParsedWindow, string, error) {
	var p ParsedWindow
	spec := strings.TrimSpace(w.Schedule)
	switch {
	case spec == "":
		return p, "schedule", errors.New("is required")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return p, "schedule", fmt.Errorf("%q: give the time zone in timeZone, not in the schedule", w.Schedule)
	case strings.HasPrefix(spec, "@every"):
		// @every counts from whenever it is asked, so it does not pin
		// windows to the clock.
		return p, "schedule", fmt.Errorf("%q: @every is not supported; use a cron expression or @hourly, @daily, @weekly, @monthly, @yearly", w.Schedule)
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return p, "schedule", fmt.Errorf("%q: %w", w.Schedule, err)
	}
	if w.Duration == "" {
		return p, "duration", errors.New("is required")
	}
	d, err := time.ParseDuration(w.Duration)
	if err != nil {
		return p, "duration", err
	}
	if d <= 0 {
		return p, "duration", fmt.Errorf("%q must be positive", w.Duration)
	}
	loc := time.UTC
	if w.TimeZone != "" {
		// LoadLocation also takes "Local", which would make the window
		// depend on the machine.
		if w.TimeZone == "Local" {
			return p, "timeZone", errors.New(`"Local" is not a time zone name; give an IANA name such as "Europe/Berlin"`)
		}
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			return p, "timeZone", fmt.Errorf("%q is not a known time zone: %w", w.TimeZone, err)
		}
	}
	return ParsedWindow{Schedule: sched, Location: loc, Duration: d}, "", nil
}

// BundleRef names the bundles a bundle depends on: by name, or by a
// selector over bundle labels.
type BundleRef struct {
	Name     string                `json:"name,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// AcceptedStates are the states that satisfy the dependency; default
	// Ready.
	AcceptedStates []string `json:"acceptedStates,omitempty"`
}
