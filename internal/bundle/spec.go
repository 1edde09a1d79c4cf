package bundle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	OverrideTargets []TargetSelector `json:"overrideTargets,omitempty"`
	// DependsOn lists bundles that must be in an accepted state on a
	// cluster before this bundle deploys there.
	DependsOn []BundleRef `json:"dependsOn,omitempty"`
}

// Target modes.
const (
	FirstMatch = "FirstMatch"
	AllMatches = "AllMatches"
)

// TargetSelector selects clusters, as a GitRepo target does. Its criteria
// are AND-ed; one without criteria matches nothing; clusterSelector {}
// matches every cluster.
type TargetSelector struct {
	Name                 string                `json:"name,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// Target is a fleet.yaml target or target customization: a selector plus
// options that override the bundle's on the clusters it selects.
type Target struct {
	TargetSelector `json:",inline"`
	// DoNotDeploy keeps the bundle off the selected clusters.
	DoNotDeploy bool `json:"doNotDeploy,omitempty"`
	Options     `json:",inline"`
}

// RolloutStrategy is Fleet's rollout strategy. Percentages are of the
// targeted clusters.
type RolloutStrategy struct {
	MaxUnavailable           *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	MaxUnavailablePartitions *intstr.IntOrString `json:"maxUnavailablePartitions,omitempty"`
	AutoPartitionSize        *intstr.IntOrString `json:"autoPartitionSize,omitempty"`
	AutoPartitionThreshold   *int                `json:"autoPartitionThreshold,omitempty"`
	MaxNew                   int                 `json:"maxNew,omitempty"`
	Partitions               []Partition         `json:"partitions,omitempty"`
}

// Partition is one manually defined group of clusters of a rollout.
type Partition struct {
	Name                 string                `json:"name,omitempty"`
	MaxUnavailable       *intstr.IntOrString   `json:"maxUnavailable,omitempty"`
	ClusterName          string                `json:"clusterName,omitempty"`
	ClusterSelector      *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	ClusterGroup         string                `json:"clusterGroup,omitempty"`
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
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
