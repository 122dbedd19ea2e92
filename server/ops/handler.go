package ops

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the ops listener:
//
//	GET /healthz   liveness (Health.Healthz)
//	GET /readyz    readiness (Health.Readyz)
//	GET /metrics   Prometheus exposition of reg
//
// Other paths answer 404 and other methods 405. m, if not nil, becomes
// h.Metrics when h has none, so /readyz results are exported as
// custos_ready_check; it may be nil. reg is the Gatherer matching the
// Registerer given to New (a *prometheus.Registry is both). Scrape
// failures are answered with HTTP 500 and are not logged here.
//
// Mount it on a listener of its own (see NewHTTPServer), never on the MCP
// endpoint.
func Handler(h *Health, m *Metrics, reg prometheus.Gatherer) http.Handler {
	if h == nil {
		h = &Health{}
	}
	if m != nil {
		h.mu.Lock()
		if h.Metrics == nil {
			h.Metrics = m
		}
		h.mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.Healthz)
	mux.HandleFunc("GET /readyz", h.Readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.HTTPErrorOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	return mux
}

// MaxConnections is how many connections the ops listener serves at once
// (its listener is wrapped by the assembly; beyond it a new connection
// waits in the listen queue until one closes). Scrapers and probes keep a
// few each; without a cap a client trickling its headers held a goroutine,
// its buffers and a descriptor of the process for each connection it
// opened, however many (TestOpsConnectionsBeyondTheLimitWait in app).
const MaxConnections = 32

// NewHTTPServer returns an *http.Server for the ops listener at addr
// serving handler, with timeouts suited to probes and scrapes (a slow or
// idle client cannot hold connections open).
func NewHTTPServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}
