package strategy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-gitops/flotilla/internal/api"
	"github.com/flotilla-gitops/flotilla/internal/fleetyaml"
	"github.com/flotilla-gitops/flotilla/internal/target"
)

// Defaults of a rollout strategy's settings, as in Fleet where Fleet has
// the setting.
var (
	// DefaultMaxUnavailable lets every cluster update at once.
	DefaultMaxUnavailable = intstr.FromString("100%")
	// DefaultAutoPartitionSize is the size of automatic partitions.
	DefaultAutoPartitionSize = intstr.FromString("25%")
)

const (
	// DefaultAutoPartitionThreshold is the number of clusters from which
	// they are split into automatic partitions.
	DefaultAutoPartitionThreshold = 200
	// DefaultReadyTimeout is how long a deployed cluster may stay NotReady
	// before it counts as failed.
	DefaultReadyTimeout = 300 * time.Second
	// AllName names the single partition of a strategy without manual
	// partitions below the auto-partition threshold.
	AllName = "all"
	// AutoPartitionPrefix starts the names of automatic partitions,
	// followed by their index from 0: auto-partition-0, auto-partition-1…
	AutoPartitionPrefix = "auto-partition-"
	// NoFailureThreshold is Plan.FailureThreshold when failures never halt
	// the rollout.
	NoFailureThreshold = -1
)

// Plan is how a bundle rolls out to its targeted clusters. It is a plain
// JSON value.
type Plan struct {
	// MaxUnavailable is how many of the bundle's clusters may be
	// unavailable (updating or not ready) at once; at least 1.
	MaxUnavailable int `json:"maxUnavailable"`
	// MaxUnavailablePartitions is how many partitions may be unavailable
	// while the next one starts: with 0, a partition starts only when all
	// before it are available.
	MaxUnavailablePartitions int `json:"maxUnavailablePartitions"`
	// Partitions are the groups clusters update in, in rollout order.
	// Every cluster is in exactly one.
	Partitions []Partition `json:"partitions"`
	// FailureThreshold: the rollout halts when more clusters than this
	// have failed. NoFailureThreshold (-1) means never; 0 means at the
	// first failure.
	FailureThreshold int `json:"failureThreshold"`
	// RollbackOnFailure returns the clusters already updated to their
	// previous deployment when the rollout halts.
	RollbackOnFailure bool `json:"rollbackOnFailure,omitempty"`
	// ReadyTimeout is how long a deployed cluster may stay NotReady before
	// it counts as failed.
	ReadyTimeout time.Duration `json:"readyTimeout"`
}

// Partition is a group of clusters that update together.
type Partition struct {
	// Name is the manual partition's name (partition-<index> when it has
	// none), fleetyaml.UnpartitionedName, AllName, or AutoPartitionPrefix
	// followed by the index. Names are unique within a plan.
	Name string `json:"name"`
	// MaxUnavailable is how many of the partition's clusters may be
	// unavailable at once; at least 1.
	MaxUnavailable int `json:"maxUnavailable"`
	// RequireApproval holds the partition until it is approved.
	RequireApproval bool `json:"requireApproval,omitempty"`
	// Clusters are the names of the partition's clusters, sorted; never
	// nil.
	Clusters []string `json:"clusters"`
}

// Compute returns the rollout plan of a bundle with strategy rs (nil means
// all defaults) over its targeted clusters. Cluster names must be
// non-empty and unique; the order of clusters does not matter.
//
// Counts and percentages: a percentage is of the number of clusters (of
// the bundle for maxUnavailable and failureThreshold, of the partition
// for a partition's maxUnavailable, of the number of partitions for
// maxUnavailablePartitions), rounded up; "25%" of 250 is 63.
//
//   - maxUnavailable defaults to 100%. The bundle's and each partition's
//     limit is at least 1, even when set to 0 or when a percentage of few
//     clusters rounds to 0, so a rollout never stalls; an empty partition
//     and a bundle without clusters get 1 too.
//   - maxUnavailablePartitions defaults to 0 and may be 0.
//   - failureThreshold unset gives NoFailureThreshold; set, it may be 0.
//   - readyTimeoutSeconds defaults to 300.
//
// Partitions:
//
//   - Manual (rs.Partitions non-empty): the partitions in their declared
//     order, each holding the clusters it selects (clusterName,
//     clusterSelector, clusterGroup, clusterGroupSelector, AND-ed, as
//     target.Matches; a partition without criteria selects nothing) that
//     no earlier partition selected. A partition that
//     selects no cluster stays in the plan, empty, so the plan keeps the
//     declared order and names. An unnamed partition i is named
//     partition-<i>. A partition's maxUnavailable defaults to the
//     strategy's, scaled to the partition's size. The clusters no
//     partition selects form a last partition, fleetyaml.UnpartitionedName,
//     which uses the strategy's maxUnavailable and needs no approval; it
//     is left out when empty.
//   - Automatic (no manual partitions): with at least
//     autoPartitionThreshold clusters (default 200), the clusters sorted
//     by name are cut into partitions of autoPartitionSize clusters
//     (default 25%, at least 1), the last one holding the rest, named
//     auto-partition-0, auto-partition-1…; with fewer clusters, or with
//     autoPartitionSize set to the integer 0 (Fleet's way to turn
//     automatic partitions off), one partition named AllName holds them
//     all, even when there are none.
//
// An invalid count or percentage, an invalid label selector, or two
// partitions with the same name is an error naming the key, e.g.
// "rolloutStrategy.partitions[1].maxUnavailable: ...".
func Compute(rs *fleetyaml.RolloutStrategy, clusters []fleetyaml.Cluster) (Plan, error) {
	if rs == nil {
		rs = &fleetyaml.RolloutStrategy{}
	}
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, func(a, b fleetyaml.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	for i, c := range sorted {
		if c.Name == "" {
			return Plan{}, errors.New("a cluster has no name")
		}
		if i > 0 && sorted[i-1].Name == c.Name {
			return Plan{}, fmt.Errorf("cluster %s is given twice", c.Name)
		}
	}

	maxUnavailable, err := limit("rolloutStrategy.maxUnavailable", len(sorted), rs.MaxUnavailable, &DefaultMaxUnavailable)
	if err != nil {
		return Plan{}, err
	}
	var parts []Partition
	if len(rs.Partitions) > 0 {
		parts, err = manualPartitions(rs, sorted)
	} else {
		parts, err = autoPartitions(rs, sorted)
	}
	if err != nil {
		return Plan{}, err
	}
	maxUnavailablePartitions := 0
	if rs.MaxUnavailablePartitions != nil {
		if maxUnavailablePartitions, err = scale("rolloutStrategy.maxUnavailablePartitions", rs.MaxUnavailablePartitions, len(parts)); err != nil {
			return Plan{}, err
		}
	}
	failureThreshold := NoFailureThreshold
	if rs.FailureThreshold != nil {
		if failureThreshold, err = scale("rolloutStrategy.failureThreshold", rs.FailureThreshold, len(sorted)); err != nil {
			return Plan{}, err
		}
	}
	readyTimeout := DefaultReadyTimeout
	if s := rs.ReadyTimeoutSeconds; s != nil {
		if *s <= 0 {
			return Plan{}, fmt.Errorf("rolloutStrategy.readyTimeoutSeconds: %d must be positive", *s)
		}
		readyTimeout = time.Duration(*s) * time.Second
	}
	return Plan{
		MaxUnavailable:           maxUnavailable,
		MaxUnavailablePartitions: maxUnavailablePartitions,
		Partitions:               parts,
		FailureThreshold:         failureThreshold,
		RollbackOnFailure:        rs.RollbackOnFailure,
		ReadyTimeout:             readyTimeout,
	}, nil
}

// partitionSelectors returns the selector of each of rs's partitions,
// named as in the plan. It rejects duplicate and reserved names and invalid
// selectors, even when there is no cluster to match them against.
func partitionSelectors(rs *fleetyaml.RolloutStrategy) ([]api.TargetSelector, error) {
	selectors := make([]api.TargetSelector, len(rs.Partitions))
	names := make(map[string]int, len(rs.Partitions))
	for i, p := range rs.Partitions {
		key := fmt.Sprintf("rolloutStrategy.partitions[%d]", i)
		name := fleetyaml.PartitionName(i, p)
		if name == fleetyaml.UnpartitionedName {
			return nil, fmt.Errorf("%s.name: %q is reserved for the clusters no partition selects", key, name)
		}
		if j, dup := names[name]; dup {
			return nil, fmt.Errorf("%s.name: %q is also the name of partitions[%d]", key, name, j)
		}
		names[name] = i
		selectors[i] = api.TargetSelector{
			Name:                 name,
			ClusterName:          p.ClusterName,
			ClusterSelector:      p.ClusterSelector,
			ClusterGroup:         p.ClusterGroup,
			ClusterGroupSelector: p.ClusterGroupSelector,
		}
		if _, err := target.Matches(selectors[i], fleetyaml.Cluster{}); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return selectors, nil
}

// assignClusters puts each of the sorted clusters in members[i] of the
// first selector i that selects it, or in rest when none does.
func assignClusters(selectors []api.TargetSelector, sorted []fleetyaml.Cluster) (members [][]string, rest []string, _ error) {
	members = make([][]string, len(selectors))
	rest = []string{}
	for _, c := range sorted {
		placed := false
		for i, sel := range selectors {
			ok, err := target.Matches(sel, c)
			if err != nil {
				return nil, nil, fmt.Errorf("rolloutStrategy.partitions[%d]: %w", i, err)
			}
			if ok {
				members[i] = append(members[i], c.Name)
				placed = true
				break
			}
		}
		if !placed {
			rest = append(rest, c.Name)
		}
	}
	return members, rest, nil
}

// manualPartitions assigns each of the sorted clusters to the first
// partition of rs that selects it.
func manualPartitions(rs *fleetyaml.RolloutStrategy, sorted []fleetyaml.Cluster) ([]Partition, error) {
	selectors, err := partitionSelectors(rs)
	if err != nil {
		return nil, err
	}
	members, rest, err := assignClusters(selectors, sorted)
	if err != nil {
		return nil, err
	}

	parts := make([]Partition, 0, len(rs.Partitions)+1)
	for i, p := range rs.Partitions {
		key := fmt.Sprintf("rolloutStrategy.partitions[%d].maxUnavailable", i)
		if p.MaxUnavailable == nil {
			key = "rolloutStrategy.maxUnavailable"
		}
		part, err := newPartition(key, selectors[i].Name, members[i], p.MaxUnavailable, rs.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		part.RequireApproval = p.RequireApproval
		parts = append(parts, part)
	}
	if len(rest) > 0 {
		part, err := newPartition("rolloutStrategy.maxUnavailable", fleetyaml.UnpartitionedName, rest, rs.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// autoPartitions cuts the sorted clusters into partitions of
// autoPartitionSize once there are autoPartitionThreshold of them.
func autoPartitions(rs *fleetyaml.RolloutStrategy, sorted []fleetyaml.Cluster) ([]Partition, error) {
	names := make([]string, len(sorted))
	for i, c := range sorted {
		names[i] = c.Name
	}
	threshold := DefaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	size := rs.AutoPartitionSize
	off := size != nil && size.Type == intstr.Int && size.IntVal <= 0
	if off || len(names) == 0 || len(names) < threshold {
		part, err := newPartition("rolloutStrategy.maxUnavailable", AllName, names, rs.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		return []Partition{part}, nil
	}
	chunk, err := limit("rolloutStrategy.autoPartitionSize", len(names), size, &DefaultAutoPartitionSize)
	if err != nil {
		return nil, err
	}
	var parts []Partition
	for i := 0; len(names) > 0; i++ {
		n := min(chunk, len(names))
		part, err := newPartition("rolloutStrategy.maxUnavailable", fmt.Sprintf("%s%d", AutoPartitionPrefix, i), names[:n:n], rs.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
		names = names[n:]
	}
	return parts, nil
}

// newPartition makes a partition of the given sorted clusters, its
// maxUnavailable the first of limits set (default 100%) scaled to them;
// key names that setting in errors.
func newPartition(key, name string, clusters []string, limits ...*intstr.IntOrString) (Partition, error) {
	limits = append(limits, &DefaultMaxUnavailable)
	maxUnavailable, err := limit(key, len(clusters), limits...)
	if err != nil {
		return Partition{}, err
	}
	if clusters == nil {
		clusters = []string{}
	}
	return Partition{Name: name, MaxUnavailable: maxUnavailable, Clusters: clusters}, nil
}

// limit scales the first of vals that is set to total and raises the
// result to at least 1.
func limit(key string, total int, vals ...*intstr.IntOrString) (int, error) {
	for _, v := range vals {
		if v == nil {
			continue
		}
		n, err := scale(key, v, total)
		if err != nil {
			return 0, err
		}
		return max(n, 1), nil
	}
	return 1, nil
}

// scale returns v, a count or a percentage of total rounded up; a
// negative count or percentage is an error.
func scale(key string, v *intstr.IntOrString, total int) (int, error) {
	// Of 100, a percentage is its own number.
	raw, err := intstr.GetScaledValueFromIntOrPercent(v, 100, true)
	if err != nil {
		return 0, fmt.Errorf("%s: %q must be a count or a percentage such as \"25%%\": %w", key, v.String(), err)
	}
	if raw < 0 {
		return 0, fmt.Errorf("%s: %s is negative", key, v.String())
	}
	return intstr.GetScaledValueFromIntOrPercent(v, total, true)
}
