package tests

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/flotilla-gitops/flotilla/internal/temporalx"
	"github.com/flotilla-gitops/flotilla/internal/testenv"
)

// TestTemporalOnPostgres: the Temporal server process on PostgreSQL sets up
// its databases, the "default" namespace and Flotilla's search attributes;
// a workflow started there is listed by a custom search attribute
// (visibility on PostgreSQL), and after a kill -9 and a start on the same
// databases the same client sees it again.
func TestTemporalOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and a Temporal server")
	}
	begin := time.Now()
	pg := testenv.StartPostgres(t)
	t.Logf("PostgreSQL ready in %s", time.Since(begin).Round(time.Millisecond))

	begin = time.Now()
	srv := testenv.StartTemporalServer(t, testenv.TemporalServerOptions{Binary: bins.temporal, Postgres: pg})
	t.Logf("Temporal server ready on new databases in %s, RSS %s", time.Since(begin).Round(time.Millisecond), rss(t, srv.PID()))

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	c, err := temporalx.ClientOptions{Address: srv.FrontendAddress()}.Dial(ctx, nil)
	require.NoError(t, err)
	defer c.Close()

	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: temporalx.DefaultNamespace})
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: temporalx.DefaultNamespace})
	require.NoError(t, err)
	for name, typ := range temporalx.SearchAttributes() {
		assert.Equal(t, typ, attrs.GetCustomAttributes()[name], "search attribute %s", name)
	}

	// No worker polls the task queue: the workflow stays running, which is
	// all visibility needs.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "postgres-probe",
		TaskQueue:             "postgres-probe-nobody-polls",
		TypedSearchAttributes: temporal.NewSearchAttributes(temporalx.KeyGitRepo.ValueSet("x")),
	}, "Probe")
	require.NoError(t, err)
	query := temporalx.SearchAttrGitRepo + " = 'x'"
	requireListed(ctx, t, c, query, run.GetRunID())

	srv.Kill()
	begin = time.Now()
	srv.Start()
	t.Logf("Temporal server ready on existing databases after kill -9 in %s, RSS %s", time.Since(begin).Round(time.Millisecond), rss(t, srv.PID()))

	// The same client reconnects to the new process.
	requireListed(ctx, t, c, query, run.GetRunID())
	desc, err := c.DescribeWorkflowExecution(ctx, "postgres-probe", "")
	require.NoError(t, err)
	assert.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())

	begin = time.Now()
	srv.Stop()
	t.Logf("Temporal server stopped gracefully in %s", time.Since(begin).Round(time.Millisecond))
}

// requireListed waits until the visibility query lists exactly the run runID.
func requireListed(ctx context.Context, t *testing.T, c client.Client, query, runID string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(ct, err, "list %q", query)
		var runs []string
		for _, e := range resp.GetExecutions() {
			runs = append(runs, e.GetExecution().GetRunId())
		}
		assert.Equal(ct, []string{runID}, runs, "runs listed by %q", query)
	}, 20*time.Second, 100*time.Millisecond)
}

// rss returns the VmRSS line of /proc/<pid>/status, for the test log.
func rss(t *testing.T, pid int) string {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
