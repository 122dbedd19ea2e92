package server_test

import (
	"context"
	"testing"

	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family is the metric family name gathered from reg.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// requests is custos_requests_total{method, outcome}.
func requests(t *testing.T, reg *prometheus.Registry, method, outcome string) float64 {
	t.Helper()
	for _, m := range family(t, reg, "custos_requests_total").GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["method"] == method && l["outcome"] == outcome {
			return m.GetCounter().GetValue()
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

// auditAppends is the number of observations of
// custos_audit_append_duration_seconds.
func auditAppends(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	return family(t, reg, "custos_audit_append_duration_seconds").GetMetric()[0].GetHistogram().GetSampleCount()
}

// Only durable appends are observed in custos_audit_append_duration_seconds:
// CustosCheckpointLag reads its count as records appended, and fired
// (blaming the anchor directory and the signing key) while the audit log
// refused every append and nothing was appended at all.
func TestFailedAuditAppendsNotCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := ops.New(reg)
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.Metrics = m }})
	cs := f.connectRev(f.identity("clinician"), "2025-11-25")
	ctx := context.Background()
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	durable := auditAppends(t, reg)
	if durable == 0 {
		t.Fatal("a served list observed no audit append")
	}
	f.log.Close() // every append now fails
	if _, err := cs.ListResources(ctx, nil); err == nil {
		t.Fatal("a list with the audit log closed was served")
	}
	if got := auditAppends(t, reg); got != durable {
		t.Errorf("custos_audit_append_duration_seconds_count = %d after a failed append, want %d (the durable ones)", got, durable)
	}
	if got := requests(t, reg, ops.MethodList, ops.OutcomeRefused); got != 1 {
		t.Errorf("custos_requests_total{method=\"resources/list\", outcome=\"refused\"} = %v, want 1", got)
	}
}
