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
//	go run ./bench/load -flood [-flood-requests 20000] [-flood-rate 2000]
//	                    [-flood-sources 64] [-flood-workers 16]
//	                    [-flood-new-conns] [-flood-pin=true] [-clients 1] ...
//	go run ./bench/load -catalog 10000 [-catalog-rounds 5] [-json] [-data DIR] [-check]
//	go run ./bench/load -auditor 400000 [-auditor-cpu 0.5] [-clients 8] [-rounds 5] ...
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
// # An auditor beside the server (-auditor N)
//
// With -auditor N the harness serves custos alone, appends N records
// shaped like clinicians' reads to its audit log (directly, group-committed
// in batches: reading them through the server would take minutes), and
// alternates -rounds quiet slices of -duration/-rounds with one 'audit
// verify' of the whole log through the admin socket (the real auditor
// path: access record first, then the walk on the server), while -clients
// clinicians (default 8) read throughout. It reports the clinicians'
// latency in both kinds of slice, their p99 ratio, and each verify's time.
// -auditor-cpu sets the server's audit.auditor_cpu (the share of one CPU an
// auditor's walk may use; 1: unpaced), to compare pacings run after run.
//
// # The big-catalog scenario (-catalog N)
//
// With -catalog N the harness instead serves custos alone (the same
// shipped assembly, HTTPS) on a synthetic catalog of N patients (synth,
// ~10 resources each), one bearer token per persona of the data set's
// principals/, and measures each persona's first resources/list page in a
// new session (-catalog-rounds times; round 1 is the persona's first on
// the server), the pages a caller who sees nothing needs to reach the end,
// and a researcher's first read after the assembly is reopened (catalog.go;
// docs/benchmarks.md, "Big catalogs and first decisions").
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
// runtime (GC), bbolt's group-commit goroutine and timers. Per server and
// level the report gives the process's CPU per read (getrusage over that
// server's slices), the heap allocated per read (runtime/metrics) and the
// CPU per read of idle-priority GC mark workers (runtime/metrics' estimate):
// those run only on a CPU that would otherwise be idle, so a server that
// waits on its disk shows CPU per read that a saturated one does not, and
// the CPU ratio overstates custos's cost where custos is not saturated
// (runtimestats.go).
//
// custos serves its ops endpoint as `custos serve --ops-listen` does, and
// the report gives custos's own view of its measured slices from its
// Prometheus histograms, scraped before and after each slice
// (opsmetrics.go): the mean time a read spent in custos's handler, of which
// its audit append (the record's preparation and the wait for its durable
// group commit: the off-CPU part a disk adds), and a policy decision's. The
// rest of the latency a client sees is the SDK, HTTP, TLS and waiting for a
// CPU. Means only: the histograms' buckets are too coarse for percentiles.
// The -flood scenario does not serve it. The
// per-principal rate limit of `custos serve` (100/s, burst 200) is off by
// default (-rate-limit): the harness measures the read path, not the limiter.
// custos answers stateless reads with application/json (the orientation's
// "stateless JSON-response mode") and stateful ones with SSE, and the bare
// server does the same; -bare-framing json|sse overrides the bare server's
// framing, and the report then says the modes differ.
// Before each concurrency level the report probes the data directory's disk
// (4 KiB append+fsync), which custos waits on and the bare server does not.
//
// # The unauthenticated flood (-flood)
//
// With -flood it measures the abuse target of issue 16 instead: 20,000
// unauthenticated requests grow the audit volume by less than 1 MB, while
// a clinician's reads keep a p99 under twice their unloaded p99
// (runFlood). The flood comes from a separate process — this program run
// again with its configuration in CUSTOS_LOAD_FLOOD_CHILD (floodChild) —
// that sends POST /mcp requests, half without a token and half with a
// forged one, from -flood-sources loopback addresses (127.0.0.2 onward:
// the failed-authentication limit is per source address) at -flood-rate
// requests/s over keep-alive TLS connections (-flood-new-conns: a
// handshake per request). With -flood-pin (the default, Linux, two CPUs
// or more) this process — custos and the clinician — runs on the first
// CPU and the flood process on the others (sched_setaffinity), so that the
// flood's own work does not take the server's CPU. Two phases:
//
//  1. the flood alone against a server started on the log and stopped
//     around it: the audit volume's growth (bbolt's high-water mark of
//     audit.db plus any other audit file), the refusals on record (one by
//     one and counted in aggregates; they must add up to every request),
//     and custos's CPU per refused request (-cpuprofile profiles this
//     phase);
//  2. -clients clinicians (default 1) read in a closed loop in -rounds
//     alternating slices: unloaded for -duration/-rounds, then while the
//     flood process sends its share of another -flood-requests; the p99s
//     of the two are compared.
//
// The exit status is 0 whatever the figures, unless -check is given: then 1
// when a target is missed, a run had errors or the audit count does not match.
package main
