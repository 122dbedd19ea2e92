package server_test

import (
	"context"
	"testing"

	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/prometheus/client_golang/prometheus"
)

// requests is custos_requests_total{method, outcome}.
func requests(t *testing.T, reg *prometheus.Registry, method, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "custos_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["method"] == method && l["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series custos_requests_total{method=%q, outcome=%q}", method, outcome)
	return 0
}

// initialize and ping are counted by method (ops.MethodInitialize,
// ops.MethodPing), though not decided: the dashboard's "Sessions opened"
// panel is custos_requests_total{method="initialize"}, which stayed at 0
// while only resources/* were counted.
func TestInitializeAndPingCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := ops.New(reg)
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.Metrics = m }})
	cs := f.connectRev(f.identity("clinician"), "2025-11-25")
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListResources(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{ops.MethodInitialize, ops.MethodPing, ops.MethodList} {
		if got := requests(t, reg, method, ops.OutcomeAllow); got != 1 {
			t.Errorf("custos_requests_total{method=%q, outcome=\"allow\"} = %v, want 1", method, got)
		}
	}
}
