// Command load is custos's load harness: it measures what the audited read
// path costs against a bare go-sdk MCP server under the same load.
//
//	go run ./bench/load [-clients 8,64] [-duration 10s] [-warmup 2s] [-rounds 5]
//	                    [-size 4096] [-resources 1000] [-notes-per-patient 10]
//	                    [-principals 0] [-mode stateless|stateful]
//	                    [-bare-framing json|sse] [-rate-limit 0]
//	                    [-audit-batch-delay 0] [-json] [-cpuprofile FILE]
//	                    [-memprofile FILE]
//	                    [-data DIR] [-check]
//
// In one process it builds
//
//   - custos as `custos serve --dev` runs it, through the shipped assembly
//     (package app: app.Open, app.Serve): a real catalog (bbolt
//     file, opened read-only and followed as serve does) of -resources
//     synthetic clinical notes of -size bytes each, the
//     built-in default policy, a real audit log (bbolt, fsync, group commit at
//     the default settings) with a checkpointer signing the tree head with the
//     dev key, server.New + server.HTTPHandler with one dev bearer token per
//     client (each a clinician with a care relationship to every patient,
//     purpose of use TREAT, so every read is allowed and audited);
//   - a bare go-sdk server (mcp.NewServer + AddResource) serving the same
//     bytes under the same URIs, with no authentication, policy or audit;
//
// both over HTTPS on 127.0.0.1 with the same TLS 1.3 configuration and a
// self-signed ECDSA P-256 certificate made at startup (HTTP/1.1: no ALPN, as
// serve's TLS listener), with the Streamable HTTP options server.HTTPHandler
// uses for the protocol revision of -mode: stateless asks for MCP 2026-07-28
// (no sessions), stateful for 2025-11-25 sessions; custos serves both on one
// endpoint, the bare server only the mode's, and the revision each client
// negotiated is checked. For each -clients value N it connects N go-sdk
// clients to each server (every client its own session and its own HTTP/1.1
// connections), warms both up for -warmup, then lets them take turns: -rounds
// slices of -duration/-rounds each, bare then custos, every client reading
// random resources in a closed loop. Alternating short slices makes the
// comparison robust to a shared machine whose load changes from one second to
// the next. It prints reads/s, p50, p90, p99, max and errors per server, the
// custos/bare ratios, the audit log's mean records per group commit, and
// PASS/FAIL against the targets of issue 17 (docs/benchmarks.md, "Load
// harness (bench/load)"): at 8 and 64 clients custos/bare throughput ≥ 0.8
// and p99 ≤ 1.5 × bare; at 1 client custos p50 ≤ bare p50 + 1 ms.
//
// # Invariants checked
//
//   - Every read the clients were served by custos has its audit record: after
//     each custos run the audit head must have grown by exactly the number of
//     successful reads (warm-up included), and at the end the log is verified
//     (audit.VerifyFile) and its resources/read allow records are counted
//     against the reads served. A mismatch is printed loudly and fails -check.
//   - Any client error (transport, JSON-RPC, or content of the wrong length)
//     is counted, sampled and flags the run.
//
// # Caveats
//
// The load generator runs in the same process as both servers, so it competes
// for the same CPUs (as on the build machines the orientation figures come
// from). A -cpuprofile covers both servers and the clients of a concurrency
// level; samples carry the pprof label side=bare, side=custos or side=client
// (go tool pprof -tagfocus side=custos), and unlabelled samples are the
// runtime (GC), bbolt's group-commit goroutine and timers. The
// per-principal rate limit of `custos serve` (100/s, burst 200) is off by
// default (-rate-limit): the harness measures the read path, not the limiter.
// custos answers stateless reads with application/json (the orientation's
// "stateless JSON-response mode") and stateful ones with SSE, and the bare
// server does the same; -bare-framing json|sse overrides the bare server's
// framing, and the report then says the modes differ.
// Before each concurrency level the report probes the data directory's disk
// (4 KiB append+fsync), which custos waits on and the bare server does not.
//
// The exit status is 0 whatever the figures, unless -check is given: then 1
// when a target is missed, a run had errors or the audit count does not match.
package main
