package status_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

func TestFinish_PinnedCondition(t *testing.T) {
	g := status.GitRepo{Name: "app", LatestCommit: "new"}
	g.Finish()
	_, ok := g.Condition(status.ConditionPinned)
	assert.False(t, ok, "no Pinned condition unless pinned")
	assert.Len(t, g.Conditions, len(status.ConditionTypes))

	g.Pinned = &status.Pin{Commit: "old", By: "bob@host", At: time.Unix(0, 0)}
	g.Finish()
	c, ok := g.Condition(status.ConditionPinned)
	require.True(t, ok)
	assert.Equal(t, status.ConditionTrue, c.Status)
	assert.Equal(t, status.ReasonRollback, c.Reason)
	assert.Equal(t, "pinned to old by bob@host (rollback); `flotilla resume app` follows the branch again; "+
		"newest commit new is not rolled out", c.Message)
}
