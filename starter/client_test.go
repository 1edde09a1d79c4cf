package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// flakyQueries answers QueryWorkflow with errs, one per call, and then
// with value.
type flakyQueries struct {
	client.Client
	errs  []error
	value any
	calls int
}

func (f *flakyQueries) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(f.value)
	if err != nil {
		return nil, err
	}
	return client.NewValue(p), nil
}

// A workflow too busy to answer in time (a GitRepo taking a thousand
// clusters' reports) is asked again while the CLI's timeout lasts; any
// other error is reported at once.
func TestQuery_RetriesTimeouts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := &flakyQueries{value: map[string]string{"name": "fleet"},
		errs: []error{serviceerror.NewDeadlineExceeded("query timed out"), context.DeadlineExceeded}}
	var out map[string]string
	require.NoError(t, query(ctx, f, "gitrepo/x", "GitRepo x", &out))
	assert.Equal(t, 3, f.calls)
	assert.Equal(t, "fleet", out["name"])

	f = &flakyQueries{errs: []error{serviceerror.NewNotFound("gone")}}
	assert.EqualError(t, query(ctx, f, "gitrepo/x", "GitRepo x", &out), "GitRepo x not found")
	assert.Equal(t, 1, f.calls)

	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	f = &flakyQueries{errs: []error{serviceerror.NewDeadlineExceeded("query timed out"), serviceerror.NewDeadlineExceeded("again")}}
	err := query(short, f, "gitrepo/x", "GitRepo x", &out)
	assert.ErrorContains(t, err, "GitRepo x: query timed out")
	assert.Equal(t, 1, f.calls, "no second ask once the timeout is over")
}
