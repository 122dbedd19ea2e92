package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/custos-mcp/custos/server/ops"
)

// The server's own view of a read, from custos's Prometheus histograms
// (package server/ops), scraped from its /metrics endpoint before and after
// each custos slice: how long a read spent in custos's handler, how long
// its audit append took (the record's preparation and the wait for its
// durable group commit: where a read waits on the disk), and how long
// policy decisions took. The rest of a read's latency as the client sees
// it is the SDK, HTTP, TLS and the wait for a CPU. Means only: the
// histograms' buckets are too coarse for percentiles.

// histSum is a histogram's running sum (seconds) and count.
type histSum struct {
	sum   float64
	count uint64
}

func (h histSum) sub(o histSum) histSum { return histSum{h.sum - o.sum, h.count - o.count} }
func (h histSum) add(o histSum) histSum { return histSum{h.sum + o.sum, h.count + o.count} }

// meanMs is the mean observation in milliseconds; 0 without observations.
func (h histSum) meanMs() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count) * 1000
}

// opsSample is one scrape of the three histograms.
type opsSample struct {
	read   histSum // custos_request_duration_seconds{method="resources/read"}
	audit  histSum // custos_audit_append_duration_seconds
	policy histSum // custos_policy_eval_duration_seconds
}

func (s opsSample) sub(o opsSample) opsSample {
	return opsSample{s.read.sub(o.read), s.audit.sub(o.audit), s.policy.sub(o.policy)}
}

func (s opsSample) add(o opsSample) opsSample {
	return opsSample{s.read.add(o.read), s.audit.add(o.audit), s.policy.add(o.policy)}
}

// Names of the scraped series (server/ops.New).
const (
	metricRequest = "custos_request_duration_seconds"
	metricAudit   = "custos_audit_append_duration_seconds"
	metricPolicy  = "custos_policy_eval_duration_seconds"
)

// scrapeOps reads base/metrics (base: app.App.OpsURL).
func scrapeOps(ctx context.Context, base string) (opsSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return opsSample{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return opsSample{}, fmt.Errorf("ops metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return opsSample{}, fmt.Errorf("ops metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return opsSample{}, fmt.Errorf("ops metrics: %w", err)
	}
	return parseOps(fams)
}

// parseOps picks the three histograms out of a scrape.
func parseOps(fams map[string]*dto.MetricFamily) (opsSample, error) {
	var s opsSample
	var err error
	if s.read, err = histogramOf(fams, metricRequest, "method", ops.MethodRead); err != nil {
		return opsSample{}, err
	}
	if s.audit, err = histogramOf(fams, metricAudit, "", ""); err != nil {
		return opsSample{}, err
	}
	if s.policy, err = histogramOf(fams, metricPolicy, "", ""); err != nil {
		return opsSample{}, err
	}
	return s, nil
}

// histogramOf is the sum and count of the histogram name, of its series
// whose label has value (label "": its only series). A histogram without
// that series is zero (no observation yet: client_golang creates labelled
// series on first use); a name that is missing or not a histogram is an
// error.
func histogramOf(fams map[string]*dto.MetricFamily, name, label, value string) (histSum, error) {
	f, ok := fams[name]
	if !ok {
		return histSum{}, fmt.Errorf("ops metrics: no %s", name)
	}
	if f.GetType() != dto.MetricType_HISTOGRAM {
		return histSum{}, fmt.Errorf("ops metrics: %s is a %s, not a histogram", name, f.GetType())
	}
	for _, m := range f.GetMetric() {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		h := m.GetHistogram()
		return histSum{sum: h.GetSampleSum(), count: h.GetSampleCount()}, nil
	}
	return histSum{}, nil
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
