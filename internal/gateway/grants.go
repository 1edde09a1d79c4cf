package gateway

import (
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
)

// Content an agent may fetch is what the tasks the gateway handed to its
// cluster name: a manifest by its ID, options by their hash.
const (
	grantTTL        = 24 * time.Hour
	maxGrantsPerKey = 20000
)

// contentKeys maps the JSON fields of activity inputs that name content
// to the content kind they name.
var contentKeys = map[string]string{"manifestID": "manifest", "optionsHash": "options", "optionsKey": "options"}

// grants remembers, per cluster, the content its tasks named. A replica
// knows the grants of the tasks it handed out; an agent's connection
// stays with one replica, and a fetch refused after it moved fails that
// attempt only (the activity's retry polls, and so grants, again).
type grants struct {
	mu  sync.Mutex
	by  map[string]map[string]time.Time
	now func() time.Time
}

func newGrants() *grants { return &grants{by: map[string]map[string]time.Time{}, now: time.Now} }

// add grants cluster the content named in the task input in.
func (g *grants) add(cluster string, in *commonpb.Payloads) {
	var items []string
	for _, p := range in.GetPayloads() {
		var v any
		if decodeJSON(p, &v) == nil {
			items = collectContent(v, items)
		}
	}
	if len(items) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.by[cluster]
	if m == nil {
		m = map[string]time.Time{}
		g.by[cluster] = m
	}
	now := g.now()
	if len(m)+len(items) > maxGrantsPerKey {
		for k, exp := range m {
			if exp.Before(now) {
				delete(m, k)
			}
		}
	}
	for _, it := range items {
		if len(m) < maxGrantsPerKey {
			m[it] = now.Add(grantTTL)
		}
	}
}

// allowed reports whether cluster's tasks named item (kind/id).
func (g *grants) allowed(cluster, item string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	exp, ok := g.by[cluster][item]
	return ok && g.now().Before(exp)
}

// collectContent appends kind/id for every content-naming field in v.
func collectContent(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if kind, ok := contentKeys[k]; ok {
				if s, ok := val.(string); ok && s != "" {
					out = append(out, kind+"/"+s)
				}
				continue
			}
			out = collectContent(val, out)
		}
	case []any:
		for _, e := range x {
			out = collectContent(e, out)
		}
	}
	return out
}
