package drift

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/internal/deployer"
	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Correction retries back off from minBackoff, doubling, up to maxBackoff.
const (
	minBackoff = 2 * time.Second
	maxBackoff = 5 * time.Minute
)

// correct restores the release when drift is found (or a correction was
// left pending), inside its bundle's deployment windows. It reports true
// when it corrected: the caller skips the report, which the re-diff after
// the correction replaces. Objects that a controller keeps changing back
// become conflicts and are not corrected any more; a failure is recorded
// on rep and retried with backoff.
func (m *Monitor) correct(ctx context.Context, w *watched, drift []drifted, rep *status.LiveReport) bool {
	now := m.cfg.Now()
	if !m.inWindow(w, now, rep) {
		return false
	}
	if now.Before(w.nextCorrection) {
		m.later(w.t.Key(), w.nextCorrection.Sub(now))
		return false
	}
	var objects []string
	for _, d := range drift {
		if w.conflicts[d.key] != "" {
			continue
		}
		if m.conflicted(ctx, w, d, now) {
			setConflict(rep, d.entry, w.conflicts[d.key])
			continue
		}
		objects = append(objects, d.entry.String())
	}
	if len(objects) == 0 && !w.rev.Pending {
		return false
	}
	getter, err := m.cfg.Getter(w.t.Namespace)
	var rev int
	if err == nil {
		rev, err = m.cfg.Deployer.Correct(ctx, getter, w.t.Namespace, w.t.Release, w.t.DeploymentID, deployer.CorrectOptions{
			Force: w.t.Correct.Force, KeepFailHistory: w.t.Correct.KeepFailHistory, MaxHistory: w.t.MaxHistory, Owner: w.t.Owner})
	}
	if err != nil {
		m.failed(w, err, rep)
		return false
	}
	w.backoff, w.failure, w.nextCorrection = 0, "", time.Time{}
	w.corrections++
	for _, d := range drift {
		if w.conflicts[d.key] == "" {
			w.corrected[d.key] = append(w.corrected[d.key], now)
		}
	}
	m.cfg.Corrected("success")
	m.cfg.Logger.Info("Corrected drift", zap.String("bundle", w.t.Bundle), zap.String("cluster", m.cfg.Cluster),
		zap.String("release", w.t.Key()), zap.Int("revision", rev), zap.String("deploymentID", w.t.DeploymentID),
		zap.String("gitrepo", w.t.GitRepo), zap.Strings("objects", objects))
	w.rev = nil // the correction added a revision: read it
	m.later(w.t.Key(), m.cfg.Debounce)
	return true
}

// failed records a failed correction and schedules its retry.
func (m *Monitor) failed(w *watched, err error, rep *status.LiveReport) {
	if errors.Is(err, deployer.ErrNotCurrent) {
		w.rev = nil // a deploy changed the release; the watch set follows
		return
	}
	w.backoff = min(max(2*w.backoff, minBackoff), maxBackoff)
	w.nextCorrection = m.cfg.Now().Add(w.backoff)
	w.failure = fmt.Sprintf("drift correction failed (retry in %s): %v", w.backoff, err)
	rep.Error = w.failure
	m.cfg.Corrected("failure")
	m.cfg.Logger.Warn("Drift correction failed", zap.String("bundle", w.t.Bundle), zap.String("cluster", m.cfg.Cluster),
		zap.String("release", w.t.Key()), zap.String("deploymentID", w.t.DeploymentID), zap.Duration("retryIn", w.backoff),
		zap.Error(err))
	m.later(w.t.Key(), w.backoff)
}

// conflicted reports whether d drifted again within ConflictWindow of each
// of its last ConflictTries corrections; it then records the conflict,
// naming the field manager that changed it. A drift seen later than that
// after the last correction starts the count again.
func (m *Monitor) conflicted(ctx context.Context, w *watched, d drifted, now time.Time) bool {
	recent := w.corrected[d.key]
	if n := len(recent); n > 0 && now.Sub(recent[n-1]) > m.cfg.ConflictWindow {
		recent = nil
	}
	w.corrected[d.key] = recent
	if len(recent) < m.cfg.ConflictTries {
		return false
	}
	manager, field := "another field manager", ""
	if live, err := m.dyn.Resource(d.key.gvr).Namespace(d.key.namespace).Get(ctx, d.key.name, metav1.GetOptions{}); err == nil {
		if mgr, f := Owner(live, []byte(d.entry.Patch), deployer.FieldManager, FieldManager, "helm"); mgr != "" {
			manager, field = mgr, f
		}
	}
	c := manager + " keeps changing it back"
	if field != "" {
		c = manager + " keeps changing " + field + " back"
	}
	w.conflicts[d.key] = c
	m.cfg.Corrected("conflict")
	m.cfg.Logger.Warn("Drift correction conflict", zap.String("bundle", w.t.Bundle), zap.String("cluster", m.cfg.Cluster),
		zap.String("release", w.t.Key()), zap.String("object", d.entry.Object()), zap.String("fieldManager", manager),
		zap.String("field", field), zap.Int("corrections", len(recent)))
	return true
}

// setConflict marks entry's object as a conflict in rep.
func setConflict(rep *status.LiveReport, entry status.ModifiedStatus, conflict string) {
	for i := range rep.ModifiedStatus {
		if rep.ModifiedStatus[i].Object() == entry.Object() {
			rep.ModifiedStatus[i].Conflict = conflict
		}
	}
}
