package bundle

import "github.com/flotilla-gitops/flotilla/internal/fleetyaml"

// fleet.yaml's model lives in internal/fleetyaml, which links no Helm, so
// the decision packages (targeting, strategies, rollouts) stay pure; these
// names keep the reader's and renderer's code reading as before.
type (
	Bundle             = fleetyaml.Bundle
	BundleRef          = fleetyaml.BundleRef
	Cluster            = fleetyaml.Cluster
	ComparePatch       = fleetyaml.ComparePatch
	CorrectDrift       = fleetyaml.CorrectDrift
	DiffOptions        = fleetyaml.DiffOptions
	DownstreamResource = fleetyaml.DownstreamResource
	Group              = fleetyaml.Group
	HelmOptions        = fleetyaml.HelmOptions
	IgnoreOptions      = fleetyaml.IgnoreOptions
	KeyRef             = fleetyaml.KeyRef
	KustomizeOptions   = fleetyaml.KustomizeOptions
	Operation          = fleetyaml.Operation
	Options            = fleetyaml.Options
	ParsedWindow       = fleetyaml.ParsedWindow
	Partition          = fleetyaml.Partition
	RolloutStrategy    = fleetyaml.RolloutStrategy
	Spec               = fleetyaml.Spec
	Target             = fleetyaml.Target
	ValuesFrom         = fleetyaml.ValuesFrom
	Window             = fleetyaml.Window
	YAMLOptions        = fleetyaml.YAMLOptions
)

const (
	AllMatches        = fleetyaml.AllMatches
	FirstMatch        = fleetyaml.FirstMatch
	MaxReleaseNameLen = fleetyaml.MaxReleaseNameLen
	UnpartitionedName = fleetyaml.UnpartitionedName
)
