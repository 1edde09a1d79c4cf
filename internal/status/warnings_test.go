package status_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// Warnings leave the state alone: Accepted stays True (so healthy), with a
// reason and the first warnings quoted; an Error still wins.
func TestFinish_Warnings(t *testing.T) {
	ready := []status.Deployment{{Bundle: "app", Cluster: "c1", State: status.Ready, Resources: 1, ReadyResources: 1}}
	w := func(i int) string { return fmt.Sprintf(`app/fleet.yaml: unknown field "k%d" (ignored)`, i) }
	tests := []struct {
		name     string
		warnings []string
		err      string
		want     status.Condition
	}{
		{"none", nil, "", status.Condition{Type: "Accepted", Status: "True"}},
		{"one", []string{w(1)}, "", status.Condition{Type: "Accepted", Status: "True", Reason: status.ReasonWarnings,
			Message: "1 warning: " + w(1)}},
		{"three quoted", []string{w(1), w(2), w(3)}, "", status.Condition{Type: "Accepted", Status: "True",
			Reason: status.ReasonWarnings, Message: "3 warnings: " + w(1) + "; " + w(2) + "; " + w(3)}},
		{"more are elided", []string{w(1), w(2), w(3), w(4)}, "", status.Condition{Type: "Accepted", Status: "True",
			Reason: status.ReasonWarnings, Message: "4 warnings: " + w(1) + "; " + w(2) + "; " + w(3) + "; ..."}},
		{"an error wins", []string{w(1)}, "bad fleet.yaml", status.Condition{Type: "Accepted", Status: "False",
			Reason: "Error", Message: "bad fleet.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := status.GitRepo{Name: "app", Commit: "abc", Deployments: ready, Warnings: tt.warnings, Error: tt.err}
			g.Finish()
			c, ok := g.Condition(status.ConditionAccepted)
			assert.True(t, ok)
			assert.Equal(t, tt.want, c)
			assert.Equal(t, status.ConditionTypes, conditionTypes(g.Conditions), "always all of them, in order")
			if tt.err == "" {
				assert.Equal(t, "Ready", g.Display.State, "warnings do not change the state")
				assert.True(t, c.Healthy())
			}
		})
	}
}

func TestLimitWarnings(t *testing.T) {
	many := make([]string, status.MaxWarnings+5)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	tests := []struct {
		name string
		in   []string
		// wantLen and wantLast describe the result.
		wantLen  int
		wantLast string
	}{
		{"none", nil, 0, ""},
		{"at the limit", many[:status.MaxWarnings], status.MaxWarnings, fmt.Sprint(status.MaxWarnings - 1)},
		{"over the limit", many, status.MaxWarnings, "... and 6 more warnings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := status.LimitWarnings(tt.in)
			assert.Len(t, got, tt.wantLen)
			if tt.wantLen > 0 {
				assert.Equal(t, tt.wantLast, got[len(got)-1])
			}
		})
	}
	assert.Equal(t, "49", many[49], "the input is not modified")
}
