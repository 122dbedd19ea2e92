package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// floodChildEnv names the environment variable that turns the load
// command into the flood process: its value is the floodConfig as JSON.
const floodChildEnv = "CUSTOS_LOAD_FLOOD_CHILD"

// floodConfig configures the flood process.
type floodConfig struct {
	CAPEM   string  `json:"ca_pem"`  // the server's certificate
	Sources int     `json:"sources"` // source addresses 127.0.0.2 … 127.0.0.(1+Sources)
	Workers int     `json:"workers"` // requests in flight
	Rate    float64 `json:"rate"`    // requests/s; 0 unpaced
	// NewConns opens a new connection (TCP and TLS handshake) for every
	// request instead of keeping connections alive.
	NewConns bool `json:"new_conns"`
}

// floodBatch is the flood process's answer to one batch: how the server
// answered, and what the batch cost the flood process.
type floodBatch struct {
	Sent    int            `json:"sent"`
	Status  map[string]int `json:"status"` // HTTP status → count; "error" for transport errors
	Seconds float64        `json:"seconds"`
	CPUms   float64        `json:"cpu_ms"` // the flood process's CPU during the batch
	Samples []string       `json:"error_samples,omitempty"`
	CPUs    []int          `json:"cpus,omitempty"` // the CPUs the flood process may run on
}

// floodBody is what every flood request asks: a resources/list, which the
// server never reaches without a valid token.
const floodBody = `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`

// floodChild is the flood process (see runFlood). It reads its
// configuration from the environment, then for each line "N URL" on stdin
// sends N unauthenticated requests — even ones without a token, odd ones
// with a forged one — round-robin over the source addresses, paced at the
// configured rate, and writes one floodBatch as a JSON line on stdout. It
// exits at the end of stdin.
func floodChild(cfgJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg floodConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil || cfg.Sources < 1 || cfg.Workers < 1 {
		fmt.Fprintf(stderr, "load flood: bad configuration in %s\n", floodChildEnv)
		return 2
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cfg.CAPEM)) {
		fmt.Fprintln(stderr, "load flood: no certificate in the configuration")
		return 2
	}
	clients := make([]*http.Client, cfg.Sources)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: sourceIP(i)}}
		clients[i] = &http.Client{Timeout: readTimeout, Transport: &http.Transport{
			DialContext:         d.DialContext,
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
			MaxIdleConnsPerHost: cfg.Workers/cfg.Sources + 1,
			DisableKeepAlives:   cfg.NewConns,
			IdleConnTimeout:     time.Minute,
		}}
	}
	sc := bufio.NewScanner(stdin)
	enc := json.NewEncoder(stdout)
	next := 0 // request number, across batches: it picks the source and the token
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		n, err := 0, errors.New("want: N URL")
		if len(f) == 2 {
			n, err = strconv.Atoi(f[0])
		}
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "load flood: want a number of requests and a URL, got %q\n", sc.Text())
			return 2
		}
		b := sendBatch(context.Background(), cfg, clients, f[1], next, n)
		next += n
		if err := enc.Encode(b); err != nil {
			return 1
		}
	}
	return 0
}

// sourceIP is the source address of flood connection set i: 127.0.0.2
// onward (all of 127/8 is the loopback interface on Linux).
func sourceIP(i int) net.IP {
	return net.IPv4(127, byte((2+i)>>16), byte((2+i)>>8), byte(2+i))
}

// sendBatch sends requests first … first+n-1 with cfg.Workers in flight.
func sendBatch(ctx context.Context, cfg floodConfig, clients []*http.Client, url string, first, n int) floodBatch {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		status  = map[string]int{}
		samples []string
	)
	c0 := processCPU()
	start := time.Now()
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[string]int{}
			for j := w; j < n; j += cfg.Workers {
				if cfg.Rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(j) / cfg.Rate * float64(time.Second)))))
				}
				k := first + j
				code, err := floodRequest(ctx, clients[k%len(clients)], url, k)
				if err != nil {
					local["error"]++
					mu.Lock()
					if len(samples) < maxErrorSamples {
						samples = append(samples, err.Error())
					}
					mu.Unlock()
					continue
				}
				local[strconv.Itoa(code)]++
			}
			mu.Lock()
			for k, v := range local {
				status[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return floodBatch{Sent: n, Status: status, Seconds: time.Since(start).Seconds(), CPUms: ms(processCPU() - c0), Samples: samples, CPUs: allowedCPUs()}
}

// floodRequest sends unauthenticated request k (a forged token if k is odd)
// and returns the status.
func floodRequest(ctx context.Context, c *http.Client, url string, k int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(floodBody))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if k%2 == 1 {
		req.Header.Set("Authorization", "Bearer forged-"+strconv.Itoa(k))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, errors.Join(fmt.Errorf("reading a %d answer", resp.StatusCode), err)
	}
	return resp.StatusCode, nil
}

// floodProcess is the running flood process, seen from the harness.
type floodProcess struct {
	stdin  io.WriteCloser
	out    *bufio.Scanner
	wait   func() error
	stderr *strings.Builder
}

// batch asks the flood process for n requests to url and waits for its
// answer.
func (p *floodProcess) batch(n int, url string) (floodBatch, error) {
	var b floodBatch
	if _, err := fmt.Fprintf(p.stdin, "%d %s\n", n, url); err != nil {
		return b, fmt.Errorf("flood process: %w (stderr: %s)", err, p.stderr)
	}
	if !p.out.Scan() {
		return b, fmt.Errorf("flood process ended: %v (stderr: %s)", p.out.Err(), p.stderr)
	}
	if err := json.Unmarshal(p.out.Bytes(), &b); err != nil {
		return b, fmt.Errorf("flood process: %w", err)
	}
	return b, nil
}

// stop ends the flood process (end of its stdin) and waits for it.
func (p *floodProcess) stop() error {
	p.stdin.Close()
	return p.wait()
}

// newLineScanner scans the flood process's answers, one JSON line each.
func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	return sc
}
