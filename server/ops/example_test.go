package ops_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/server/ops"
)

func Example() {
	reg := prometheus.NewRegistry()
	m := ops.New(reg)
	m.ObserveRequest(ops.MethodRead, ops.OutcomeAllow, 4*time.Millisecond)

	var h ops.Health
	h.AddCheck("audit", func(context.Context) error { return nil })
	h.AddCheck("keys", func(context.Context) error { return ops.NewSafeError("keys stale") })
	srv := ops.NewHTTPServer("127.0.0.1:9090", ops.Handler(&h, m, reg))

	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 503 {"status":"not_ready","checks":{"audit":"ok","keys":"keys stale"},"failing":["keys"]}
}
