package deployer

import (
	"fmt"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// adopt records owner on cur, the revision a release runs, which names
// no owner (stateUnowned): a release deployed before owners were recorded
// belongs to whoever deploys it first, at once, not at its next change.
// Only the record's chart annotations change; no object is touched.
func (d *Deployer) adopt(cfg *action.Configuration, cur *release.Release, owner Owner) error {
	d.log.Info("Adopting release without owner", zap.String("release", cur.Name), zap.String("namespace", cur.Namespace),
		zap.Int("revision", cur.Version), zap.String("owner", string(owner)))
	chrt := *cur.Chart
	md := *chrt.Metadata
	md.Annotations = with(md.Annotations, map[string]string{OwnerAnnotation: string(owner)})
	chrt.Metadata = &md
	cur.Chart = &chrt
	if err := cfg.Releases.Update(cur); err != nil {
		return fmt.Errorf("record owner of release %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	return nil
}
