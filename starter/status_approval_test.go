package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-gitops/flotilla/internal/status"
)

// flotilla status shows, under a partition waiting for approval, the
// summary of its plan.
func TestPrintWaits_Plan(t *testing.T) {
	var buf bytes.Buffer
	printWaits(&buf, []status.Wait{
		{Bundle: "web", Kind: status.WaitApproval, Partition: "prod", Message: "bundle web: partition prod waits for approval",
			Plan: "1 install, 2 upgrade on 3 cluster(s)"},
		{Bundle: "db", Kind: status.WaitWindow, Partition: "prod", Message: "bundle db: partition prod waits for a deployment window"},
	})
	assert.Equal(t, `Waits:
  bundle db partition prod, Window: bundle db: partition prod waits for a deployment window
  bundle web partition prod, Approval: bundle web: partition prod waits for approval
    plan: 1 install, 2 upgrade on 3 cluster(s)
`, buf.String())
}
