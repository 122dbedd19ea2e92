package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readTimeout bounds one read, so that a stuck request shows up as an
// error instead of stalling the run.
const readTimeout = 30 * time.Second

// maxErrorSamples is how many distinct error messages a run keeps.
const maxErrorSamples = 5

// target is a server under load.
type target struct {
	name   string   // "bare" or "custos"
	url    string   // https://127.0.0.1:PORT/mcp
	tokens []string // bearer token of client i, or nil (no authentication)
}

// runResult is one run of N clients against one server.
type runResult struct {
	Server  string `json:"server"`
	Clients int    `json:"clients"`
	// Reads and Errors count the measured window (after warm-up).
	Reads       int64   `json:"reads"`
	Errors      int64   `json:"errors"`
	Seconds     float64 `json:"seconds"`
	ReadsPerSec float64 `json:"reads_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	// TotalReads and TotalErrors include the warm-up: every successful
	// custos read, warm-up included, must have its audit record.
	TotalReads   int64    `json:"total_reads"`
	TotalErrors  int64    `json:"total_errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// CPUPerReadMs is the process's CPU time (user + system, every
	// goroutine: this server, its clients, GC, the audit log's commits)
	// during this server's measured slices, per read served. It varies less
	// from run to run than throughput on a shared machine, so ratios of it
	// show whether a change made custos cheaper. 0 where not measured.
	CPUPerReadMs float64 `json:"cpu_per_read_ms"`
	// IdleGCPerReadMs is the CPU that idle-priority GC mark workers used
	// in the same slices, per read (runtime/metrics' estimate, accounted
	// when a GC cycle ends, so a cycle that spans two slices counts in the
	// second: meaningful over slices of seconds only). These workers run
	// only on a CPU that would otherwise be idle, so a server that waits
	// (custos, on its audit commit) shows CPU per read in CPUPerReadMs that
	// a saturated one does not (see runtimestats.go).
	IdleGCPerReadMs float64 `json:"idle_gc_per_read_ms,omitempty"`
	// AllocKBPerRead is the heap the process allocated in the same slices
	// per read served (clients included, for both servers alike).
	AllocKBPerRead float64 `json:"alloc_kb_per_read,omitempty"`
	// AuditRecords is how many records the custos audit log gained during
	// the run (custos only).
	AuditRecords *uint64 `json:"audit_records,omitempty"`
	// AuditCommits is how many group commits the audit log started during
	// the run (custos only): AuditRecords / AuditCommits is the mean batch.
	AuditCommits *uint64 `json:"audit_commits,omitempty"`
	// Own is custos's own view of its measured slices, from its ops
	// metrics (custos only; opsmetrics.go).
	Own *ownMeans `json:"own,omitempty"`
}

// ownMeans are means of custos's own histograms (server/ops) over the
// measured slices, with the number of observations each: a read in
// custos's handler (decision, audit append, fetch, minimization), an audit
// append (the record's preparation and the wait for its durable commit),
// a policy decision (cached or evaluated).
type ownMeans struct {
	ReadMs        float64 `json:"read_ms"`
	Reads         uint64  `json:"reads"`
	AuditAppendMs float64 `json:"audit_append_ms"`
	AuditAppends  uint64  `json:"audit_appends"`
	PolicyMs      float64 `json:"policy_ms"`
	PolicyEvals   uint64  `json:"policy_evals"`
}

// clientState is one closed-loop client's tally, across slices.
type clientState struct {
	lat         []time.Duration // measured reads only
	ok, errs    int64           // measured slices
	okAll, eAll int64           // warm-up included
	samples     []string
}

// fleet is n connected clients of one server. Each client has its own
// session and its own HTTP/1.1 connections (its own http.Transport), as
// separate MCP clients would.
type fleet struct {
	t          target
	sessions   []*mcp.ClientSession
	transports []*http.Transport
	states     []*clientState
	measured   time.Duration // total measured time
}

// connect connects n clients to t, at most 8 handshakes in flight.
// Clients ask for protocol revision version.
func connect(ctx context.Context, t target, n int, version string, pool *x509.CertPool) (*fleet, error) {
	f := &fleet{t: t, sessions: make([]*mcp.ClientSession, n), transports: make([]*http.Transport, n), states: make([]*clientState, n)}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make([]error, n)
	for i := range n {
		f.states[i] = &clientState{lat: make([]time.Duration, 0, 4096)}
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			token := ""
			if t.tokens != nil {
				token = t.tokens[i%len(t.tokens)]
			}
			f.transports[i] = &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
				ForceAttemptHTTP2:   false, // HTTP/1.1 for both servers
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     time.Minute,
			}
			hc := &http.Client{Transport: bearer{token: token, next: f.transports[i]}}
			c := mcp.NewClient(&mcp.Implementation{Name: "custos-load", Version: "1"}, nil)
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			f.sessions[i], errs[i] = c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: t.url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			// The mode is what was negotiated, not what was asked for.
			if got := f.sessions[i].InitializeResult().ProtocolVersion; got != version {
				err = fmt.Errorf("negotiated protocol %s, not %s", got, version)
			}
		}
		if err != nil {
			f.close()
			return nil, fmt.Errorf("%s: client %d: %w", t.name, i, err)
		}
	}
	return f, nil
}

// close ends every session and closes idle connections.
func (f *fleet) close() {
	for i, cs := range f.sessions {
		if cs != nil {
			cs.Close()
		}
		if f.transports[i] != nil {
			f.transports[i].CloseIdleConnections()
		}
	}
}

// slice has every client read random URIs in a closed loop for dur; reads
// started in the slice are tallied, and their latencies kept if measure.
func (f *fleet) slice(ctx context.Context, dur time.Duration, measure bool, d dataset, seed uint64) error {
	done := make(chan struct{})
	t := time.AfterFunc(dur, func() { close(done) })
	defer t.Stop()
	return f.sliceUntil(ctx, done, measure, d, seed)
}

// sliceUntil is slice until done is closed: reads started before are
// tallied, and the measured time is the time until then.
func (f *fleet) sliceUntil(ctx context.Context, done <-chan struct{}, measure bool, d dataset, seed uint64) error {
	start := time.Now()
	var wg sync.WaitGroup
	for i := range f.sessions {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
			defer wg.Done()
			st, cs := f.states[i], f.sessions[i]
			rng := mrand.New(mrand.NewPCG(seed, uint64(i)))
			for {
				t0 := time.Now()
				select {
				case <-done:
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				k := rng.IntN(len(d.uris))
				rctx, cancel := context.WithTimeout(ctx, readTimeout)
				res, err := cs.ReadResource(rctx, &mcp.ReadResourceParams{URI: d.uris[k]})
				cancel()
				el := time.Since(t0)
				if err == nil && (len(res.Contents) != 1 || len(res.Contents[0].Text) != len(d.contents[k])) {
					err = fmt.Errorf("read returned unexpected content (%d parts)", len(res.Contents))
				}
				if err != nil {
					st.eAll++
					if measure {
						st.errs++
					}
					if msg := err.Error(); len(st.samples) < maxErrorSamples && !slices.Contains(st.samples, msg) {
						st.samples = append(st.samples, msg)
					}
					continue
				}
				st.okAll++
				if measure {
					st.ok++
					st.lat = append(st.lat, el)
				}
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	wg.Wait()
	if measure {
		f.measured += elapsed
	}
	return ctx.Err()
}

// result sums the clients' tallies.
func (f *fleet) result() runResult {
	r := runResult{Server: f.t.name, Clients: len(f.sessions), Seconds: f.measured.Seconds()}
	var lat []time.Duration
	for _, st := range f.states {
		r.Reads += st.ok
		r.Errors += st.errs
		r.TotalReads += st.okAll
		r.TotalErrors += st.eAll
		lat = append(lat, st.lat...)
		for _, s := range st.samples {
			if len(r.ErrorSamples) < maxErrorSamples && !slices.Contains(r.ErrorSamples, s) {
				r.ErrorSamples = append(r.ErrorSamples, s)
			}
		}
	}
	if r.Seconds > 0 {
		r.ReadsPerSec = float64(r.Reads) / r.Seconds
	}
	slices.Sort(lat)
	r.P50ms = ms(quantile(lat, 0.50))
	r.P90ms = ms(quantile(lat, 0.90))
	r.P99ms = ms(quantile(lat, 0.99))
	if len(lat) > 0 {
		r.MaxMs = ms(lat[len(lat)-1])
	}
	return r
}

// quantile is the nearest-rank q-quantile of sorted (0 if empty):
// sorted[ceil(q*len)-1].
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// bearer adds "Authorization: Bearer TOKEN" to every request (none when
// token is empty).
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
