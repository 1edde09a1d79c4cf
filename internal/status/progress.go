package status

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Progress writes a rollout's progress on one line, e.g.
//
//	12/50 clusters ready, partition 2/4 (canary) waiting for approval
//
// It starts with the clusters whose every deployment is Ready out of all
// clusters of deps. Then, for the bundles with partitions, the first
// partition not Done ("partition i/n (name) phase", i counting from 1 in
// Index order); bundles in the same place share one phrase, which names
// them unless it covers every partitioned bundle. Then one phrase per kind
// of wait not already told by a partition, in WaitKinds order, and unknown
// kinds sorted. The result does not depend on the order of the arguments.
func Progress(deps []Deployment, parts []PartitionStatus, waits []Wait) string {
	ready, total := readyClusters(deps)
	phrases := []string{fmt.Sprintf("%d/%d clusters ready", ready, total)}
	pp, told := partitionPhrases(parts, waits)
	phrases = append(phrases, pp...)
	phrases = append(phrases, waitPhrases(waits, told)...)
	return strings.Join(phrases, ", ")
}

// partitionPhrases describes the current partition of each bundle and
// returns the phases it told.
func partitionPhrases(parts []PartitionStatus, waits []Wait) (phrases []string, told map[string]bool) {
	told = map[string]bool{}
	sorted := sortedPartitions(parts)
	var groups []phraseGroup
	bundles := 0
	for start := 0; start < len(sorted); {
		end := start
		for end < len(sorted) && sorted[end].Bundle == sorted[start].Bundle {
			end++
		}
		ps := sorted[start:end]
		start = end
		bundles++
		p, phrase, ok := currentPartition(ps, waits)
		if !ok {
			continue
		}
		told[p.Phase] = true
		i := slices.IndexFunc(groups, func(g phraseGroup) bool { return g.phrase == phrase })
		if i < 0 {
			groups = append(groups, phraseGroup{phrase: phrase})
			i = len(groups) - 1
		}
		groups[i].bundles = append(groups[i].bundles, p.Bundle)
	}
	return groupPhrases(groups, bundles), told
}

// sortedPartitions returns a copy of parts sorted by bundle, index, name
// and phase.
func sortedPartitions(parts []PartitionStatus) []PartitionStatus {
	sorted := slices.Clone(parts)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Bundle != b.Bundle {
			return a.Bundle < b.Bundle
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Phase < b.Phase
	})
	return sorted
}

// currentPartition returns the first partition of one bundle's ps (in
// Index order) that is not Done, and its phrase; ok is false when every
// partition is Done.
func currentPartition(ps []PartitionStatus, waits []Wait) (p PartitionStatus, phrase string, ok bool) {
	cur := slices.IndexFunc(ps, func(p PartitionStatus) bool { return p.Phase != PartitionDone })
	if cur < 0 {
		return PartitionStatus{}, "", false
	}
	p = ps[cur]
	phrase = fmt.Sprintf("partition %d/%d", cur+1, len(ps))
	if p.Name != "" {
		phrase += " (" + p.Name + ")"
	}
	phrase += " " + phaseText(p.Phase)
	if p.Phase == PartitionWaitingForWindow {
		if until := earliestUntil(waits, func(w Wait) bool {
			return w.Kind == WaitWindow && w.Bundle == p.Bundle && (w.Partition == "" || w.Partition == p.Name)
		}); until != "" {
			phrase += " until " + until
		}
	}
	return p, phrase, true
}

// phraseGroup is a partition phrase and the bundles it describes.
type phraseGroup struct {
	phrase  string
	bundles []string
}

// groupPhrases writes each group's phrase, naming its bundles unless it
// is the only group and covers all the bundles with partitions.
func groupPhrases(groups []phraseGroup, bundles int) []string {
	var phrases []string
	for _, g := range groups {
		switch {
		case len(groups) == 1 && len(g.bundles) == bundles:
			phrases = append(phrases, g.phrase)
		case len(g.bundles) == 1:
			phrases = append(phrases, "bundle "+g.bundles[0]+": "+g.phrase)
		default:
			phrases = append(phrases, "bundles "+strings.Join(g.bundles, ", ")+": "+g.phrase)
		}
	}
	return phrases
}

func phaseText(phase string) string {
	switch phase {
	case PartitionPending:
		return "pending"
	case PartitionWaitingForApproval:
		return "waiting for approval"
	case PartitionWaitingForWindow:
		return "waiting for window"
	case PartitionRolling:
		return "rolling"
	case PartitionDone:
		return "done"
	case PartitionHalted:
		return "halted"
	}
	return phase
}

// waitPhrases names each kind of wait once, skipping the kinds a
// partition phase told already.
func waitPhrases(waits []Wait, told map[string]bool) []string {
	has := func(kind string) bool {
		return slices.ContainsFunc(waits, func(w Wait) bool { return w.Kind == kind })
	}
	var phrases []string
	for _, kind := range WaitKinds {
		if !has(kind) {
			continue
		}
		switch kind {
		case WaitPaused:
			phrases = append(phrases, "paused")
		case WaitDependsOn:
			phrases = append(phrases, "waiting for dependencies")
		case WaitWindow:
			if told[PartitionWaitingForWindow] {
				continue
			}
			p := "waiting for window"
			if until := earliestUntil(waits, func(w Wait) bool { return w.Kind == WaitWindow }); until != "" {
				p += " until " + until
			}
			phrases = append(phrases, p)
		case WaitApproval:
			if !told[PartitionWaitingForApproval] {
				phrases = append(phrases, "waiting for approval")
			}
		case WaitMaxUnavailablePartitions:
			phrases = append(phrases, "held back by maxUnavailablePartitions")
		case WaitMaxUnavailable:
			phrases = append(phrases, "held back by maxUnavailable")
		case WaitPartitionMaxUnavailable:
			phrases = append(phrases, "held back by the partition's maxUnavailable")
		case WaitDeletionHeld:
			phrases = append(phrases, "uninstalls held")
		case WaitDeletionGuard:
			phrases = append(phrases, "uninstalls held by the deletion guard")
		}
	}
	var other []string
	for _, w := range waits {
		if w.Kind != "" && !slices.Contains(WaitKinds, w.Kind) {
			other = append(other, w.Kind)
		}
	}
	sort.Strings(other)
	for _, kind := range slices.Compact(other) {
		phrases = append(phrases, "held back by "+kind)
	}
	return phrases
}

// earliestUntil returns the earliest Until of the waits that match, ""
// when none has one. Times that do not parse as RFC3339 compare as text
// after those that do.
func earliestUntil(waits []Wait, match func(Wait) bool) string {
	best := ""
	var bestT time.Time
	bestOK := false
	for _, w := range waits {
		if w.Until == "" || !match(w) {
			continue
		}
		t, err := time.Parse(time.RFC3339, w.Until)
		ok := err == nil
		switch {
		case best == "",
			ok && !bestOK,
			ok && bestOK && (t.Before(bestT) || t.Equal(bestT) && w.Until < best),
			!ok && !bestOK && w.Until < best:
			best, bestT, bestOK = w.Until, t, ok
		}
	}
	return best
}
