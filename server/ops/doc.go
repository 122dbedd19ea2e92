// Package ops is the operational surface of custos: liveness and readiness
// probes, Prometheus metrics, the structured JSON operational log, and the
// watch on the audit volume's free space (DiskWatch: sampled periodically,
// never per request; a sample that fails counts as in the reserve).
//
// It is served on a listener of its own (see Handler and NewHTTPServer),
// never on the MCP endpoint: operators and orchestrators reach it, AI
// clients do not.
//
// # Invariants
//
//   - No PHI, payload or secret ever leaves through this package. Metric
//     label values come only from fixed sets declared here (methods,
//     outcomes, rate-limit reasons, auth statuses); anything else a caller
//     passes is recorded as "other", so a URI, a patient id or a token given
//     by mistake can never become a label value (label cardinality is
//     bounded for the same reason). Readiness answers name a check and say
//     "ok", "failing" or "timeout"; an error's text is shown only if the
//     error opts in by implementing SafeError. The JSON logger built by
//     NewJSONLogger redacts secret-looking attributes and values and drops
//     payload, URI and patient attributes above Debug level.
//   - Liveness (/healthz) depends on nothing but the process: it never
//     fails because a dependency is down, so an orchestrator restarts the
//     process only when it is wedged. Readiness (/readyz) runs every
//     registered check, in parallel, under one short deadline, and fails
//     if any check fails or does not answer in time.
//   - Metrics never use the global default registry: the caller passes the
//     prometheus.Registerer to New and the matching Gatherer to Handler.
//   - A nil *Metrics is valid and records nothing, so code paths can be
//     instrumented unconditionally.
//
// The metric names and label sets are listed on New.
package ops
