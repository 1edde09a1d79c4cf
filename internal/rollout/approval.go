package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/protocol"
)

// Approval is an approved partition, tied to what it deploys: the
// deployment ID each of its clusters gets. A rollout that replaces
// another (a cluster joined elsewhere, a sync) for the same change keeps
// the approvals whose partitions deploy the same; a partition whose
// clusters or deployment IDs changed needs a new approval.
type Approval struct {
	Bundle    string `json:"bundle"`
	Partition string `json:"partition"`
	// Units is a digest of the partition's clusters and the deployment ID
	// each gets.
	Units string `json:"units"`
	// By is who approved (the identity `flotilla approve` sent); zero
	// for approvals recorded before identities were kept, or sent by an
	// older CLI.
	By protocol.Identity `json:"by,omitzero"`
	// At is when the partition was approved (workflow time). An approval
	// kept from a replaced rollout keeps its first approver and time.
	At time.Time `json:"at,omitzero"`
}

// approvalKey is what makes an approval valid for a partition: who
// approved it does not.
type approvalKey struct{ bundle, partition, units string }

// digest is the digest of partition p of bs: its clusters, in order, each
// with its deployment ID.
func (s *Scheduler) digest(bs *bundleSched, p int) string {
	var lines []string
	for _, i := range bs.units {
		if u := s.units[i]; u.part == p {
			lines = append(lines, u.cluster+"="+u.bundle.DeploymentID)
		}
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// isApproved reports whether partition k was approved.
func (s *Scheduler) isApproved(k partitionKey) bool {
	_, ok := s.approved[k]
	return ok
}

// Approvals lists the approved partitions, with who approved each and
// when.
func (s *Scheduler) Approvals() []Approval {
	var out []Approval
	for _, bs := range s.bundles {
		for p, part := range bs.plan.Partitions {
			if a, ok := s.approved[partitionKey{bs.name, part.Name}]; ok {
				a.Units = s.digest(bs, p)
				out = append(out, a)
			}
		}
	}
	return out
}

// Restore approves again the partitions of approvals that deploy what
// they deployed when they were approved, keeping who approved them and
// when, and returns them ("bundle/partition").
func (s *Scheduler) Restore(approvals []Approval) []string {
	if len(approvals) == 0 {
		return nil
	}
	given := map[approvalKey]Approval{}
	for _, a := range approvals {
		given[approvalKey{a.Bundle, a.Partition, a.Units}] = a
	}
	var out []string
	for _, bs := range s.bundles {
		for p, part := range bs.plan.Partitions {
			k := partitionKey{bs.name, part.Name}
			if !part.RequireApproval || s.isApproved(k) {
				continue
			}
			if a, ok := given[approvalKey{bs.name, part.Name, s.digest(bs, p)}]; ok {
				a.Units = ""
				s.approved[k] = a
				out = append(out, k.String())
			}
		}
	}
	return out
}

// PartitionClusters lists, sorted, the clusters of bundle's partition
// named partition (nil when there is none).
func (s *Scheduler) PartitionClusters(bundle, partition string) []string {
	var out []string
	for _, bs := range s.bundles {
		if bs.name != bundle {
			continue
		}
		for p, part := range bs.plan.Partitions {
			if part.Name != partition {
				continue
			}
			for _, i := range bs.units {
				if u := s.units[i]; u.part == p {
					out = append(out, u.cluster)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
