package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
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
}

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

// Approvals lists the approved partitions.
func (s *Scheduler) Approvals() []Approval {
	var out []Approval
	for _, bs := range s.bundles {
		for p, part := range bs.plan.Partitions {
			if s.approved[partitionKey{bs.name, part.Name}] {
				out = append(out, Approval{Bundle: bs.name, Partition: part.Name, Units: s.digest(bs, p)})
			}
		}
	}
	return out
}

// Restore approves again the partitions of approvals that deploy what
// they deployed when they were approved, and returns them
// ("bundle/partition").
func (s *Scheduler) Restore(approvals []Approval) []string {
	if len(approvals) == 0 {
		return nil
	}
	given := map[Approval]bool{}
	for _, a := range approvals {
		given[a] = true
	}
	var out []string
	for _, bs := range s.bundles {
		for p, part := range bs.plan.Partitions {
			k := partitionKey{bs.name, part.Name}
			if !part.RequireApproval || s.approved[k] {
				continue
			}
			if given[Approval{Bundle: bs.name, Partition: part.Name, Units: s.digest(bs, p)}] {
				s.approved[k] = true
				out = append(out, k.String())
			}
		}
	}
	return out
}
