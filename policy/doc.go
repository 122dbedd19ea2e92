// Package policy is custos's single decision point: every resources/list,
// resources/read and resource-templates request is decided here, by an
// embedded Open Policy Agent engine evaluating the Rego query
// data.custos.authz.decision (see package rego for the default policy and
// docs/policy.md for the schema).
//
// An [Engine] is built once per policy revision by [Load], [LoadDir],
// [Default] or [LoadBundle]; [Engine.Decide] is then safe for concurrent use.
//
// # Batch decisions
//
// A list page is decided by [Engine.DecideBatch] (or [Reloader.DecideBatch]):
// one decision per [Item], each equal to what Decide would return for that
// item. When the policy defines the rule decisions ([BatchQuery]; detected
// at load), every item the decision cache does not hold is decided in one
// evaluation with input.items = [{"resource", "break_glass"}, ...]; otherwise
// DecideBatch evaluates [Query] per item. One evaluation costs ~10 µs before
// any rule runs, so per-item evaluation of a 100-item page cannot be fast;
// the default policy decides such a page in about the cost of twenty single
// decisions (BenchmarkDecideBatch100 runs both). See docs/policy.md, "Batch
// decisions". A candidate whose decisions and decision disagree on a grid of
// synthetic list requests is refused at load (agree.go, ErrBatchDisagrees):
// a listing must never show what a read would deny.
//
// # Nothing visible
//
// A policy may define the rule nothing_visible (package custos.authz, with
// a default; [NothingVisibleQuery]): true when no resource can be allowed
// to the principal for the purpose, whatever the resource and grant.
// [Engine.NothingVisible] evaluates it alone, so that a list can answer
// one empty page without deciding a single resource. It is not a second
// policy: the engine evaluates it with every decision, in the same
// evaluation as decision or decisions, and enforces it, so that while it
// holds every list or read decision denies (an allow it overrides gets
// the reason [ReasonNothingVisible]). Skipping a scan on its word is
// therefore exactly scanning and denying every item, whatever the policy.
// The default policy builds it from the rules that deny every resource, so
// the override never fires for it (TestNothingVisibleMeansEveryDecisionDenies
// checks both directions against the plain decisions). A policy without the
// rule, without its default, or whose rule reads more than the principal and
// the purpose (the subject cache's static analysis, at load) is never asked
// and the rule is not enforced: lists scan as before.
//
// # Decision cache
//
// A deterministic policy's decisions are memoized by a SHA-256 over the
// input (cache.go). When no rule can read a resource's URI, the key leaves
// the URI out, so one evaluation answers every resource with the same
// features for the same principal, purpose and action, and batch items are
// given without "uri". One conservative analysis of the compiled policy at
// load decides it (uriread.go): it follows the input, input.resource,
// input.items, each item and its resource through lookups by constant key,
// object.get and calls as the compiler resolved them (a policy function
// named is_object is the policy's, not the type check), and list items
// further through variables, comprehensions, `every` and the policy's own
// functions, to every read of input.resource.uri or
// input.items[i].resource.uri; what it cannot prove free of one counts as
// one (the input or input.resource used whole, a dynamic key, an import, a
// `with` replacing the input or by a function). Until h-policy11 two
// analyses answered (a text scan for input.resource.uri, inputkey.go, and
// the item analysis, itemuri.go); both took a policy function named like
// a type-check builtin for the builtin, and the cache answered one URI's
// decision for another (TestPolicyFunctionNamedLikeABuiltinDecidesPerURI).
// TestURIAnalysisIsAtLeastAsConservative keeps both as the reference the
// analysis is held to.
// Invariant: a cached decision equals the evaluated one
// (TestURIFreeCacheAgreesWithEvaluation drives a cached and an uncached
// engine through the same random requests, each feature combination under
// several URIs, single and batched; TestURIReadingPolicyDecidesPerURI
// checks a policy that reads the URI; TestListRuleDenyingByItemURIDeniesOnList
// one whose list rule alone reads it; TestReadsResourceURI and
// TestReadsItemURI the shapes of such reads).
//
// # Subject cache
//
// Values of rules that depend only on the principal and purpose of use
// (found by a static analysis of the compiled policy at load) and results
// of functions built only on those, per argument tuple, outlive one
// evaluation: each is kept for the life of the Engine in the store of its
// projection, the parts of the principal and purpose its rule reads, and so
// shared by every request that agrees on them, and by no other
// (subjectcache.go; Options.SubjectCache). A principal's later decisions
// skip them, and so does a colleague's first decision for what depends only
// on their shared roles, tenant and purpose. Rules that read any other part
// of the input are always evaluated afresh. A Reloader's candidate warms its
// cache on the serving Engine's last inputs before it is swapped in
// (warm.go; ReloaderOptions.WarmUp).
//
// Every evaluation gets custos's own virtual cache (flatcache.go): one map
// per frame by a hash of the key, where OPA's default keeps a trie with a
// hash map per key segment, and the subject cache's shared stores are kept
// the same way. It answers every lookup exactly as OPA's cache does
// (TestFlatCacheAgreesWithOPA drives both through the same random
// operations); it only costs fewer allocations: a first decision for a new
// (roles, tenant, purpose) made ~900 before, ~450 now. Flat caches are
// reused (a sync.Pool): one is released only after the evaluation that used
// it has returned, and comes back empty, its slices cleared, so that no
// value or key of one evaluation reaches another (the same test releases
// each run's cache and checks that the next, reused, answers as a new OPA
// cache).
//
// # Shared input terms
//
// The input document shares, across requests, the terms of the actions,
// of the empty array and of strings that repeat (purposes, resource types,
// tenants; a bounded table): OPA never changes a term of its input, and a
// shared term equals the one it replaces (TestSharedStringTerms,
// TestInputValueIsItsJSON).
//
// # Policy lifecycle
//
// Policies come from a directory (development: [DirSource]) or from a signed
// OPA bundle (production: [BundleSource], [LoadBundle]). A bundle is built
// from a directory with [BuildBundle], signed with ES256 by [SignBundle]
// through a [JWSSigner] (a local P-256 key, [FileSigner], or Vault Transit)
// and written with [WriteBundle]; it is a standard OPA bundle whose
// .signatures.json OPA itself verifies. Loading verifies the signature
// against the configured [VerificationKey]s (a [BundleSource] with LoadKeys
// reads them at every load, so a rotated or withdrawn Vault key version
// counts from the next one); there is no unsigned mode.
//
// A [Reloader] serves the current Engine and replaces it on [Reloader.Reload]
// (SIGHUP) or when [Reloader.Watch] sees the source change. Every candidate
// is compiled and its shipped Rego tests (*_test.rego) are run off the
// request path, within [TestRunBudget]; only a candidate that passes is
// swapped in, atomically. A broken, unsigned, tampered or failing (or too
// slow) candidate is rejected with a log line
// and an [Event] for the audit log, and the last good policy keeps serving.
//
// Every candidate with a decisions rule is also decided both ways on the
// agreement grid (agree.go). Policy files whose grid agreed once in the
// process are not decided again (vetBatch): the grid and both decisions
// are a function of the files alone. Invariant: only agreement is kept, by
// the files' digest, so a changed byte or a refusal is decided again
// (TestAgreementIsDecidedOncePerPolicy); custos policy check ([CheckBatch])
// always decides it.
// Loads are events too, and every Engine names its [Engine.Revision] and
// [Engine.BundleDigest] for the audit records of its decisions.
//
// # Invariants
//
//   - Deny by default. Only a well-formed decision with allow == true allows.
//   - Any failure is a denial: a bad input, an evaluation error, a timeout,
//     an undefined or malformed decision each return a [Decision] with
//     Allow=false, a reason code and no obligations, plus a non-nil error
//     (see errors.go). There is no code path that allows on error.
//   - Unknown obligations are denials: every obligation is checked with
//     minimize.Obligation.Validate, so the server never silently skips a
//     minimization it does not understand; a decision key other than
//     allow, reasons and obligations is a malformed decision, since it may
//     hold obligations under a name the engine would skip.
//   - One prepared query per revision. The policy modules are compiled once
//     with rego.PrepareForEval; the prepared query is reused by all
//     goroutines. The revision is "sha256:" + hex(SHA-256 of the sorted
//     (path NUL content NUL) sequence of the policy modules), so two servers
//     running the same policy files report the same revision.
//   - Every decision has a fresh ID (a random UUID) and the revision that
//     made it, for the audit log; in a batch too, one per item.
//   - A batch fails closed as a whole: a bad input, an evaluation error or
//     timeout (the deadline bounds the batch), a result that is not exactly
//     one well-formed decision per item, or any failing item of the per-item
//     fallback denies every item of the batch and returns the error. The
//     batch query is compiled with the same lock-down as [Query].
//   - The policy is sandboxed: http.send, net.* and opa.runtime are removed
//     from the capabilities (using them is a compile error), and builtin
//     errors are fatal (rego.StrictBuiltinErrors) rather than silently
//     undefined. Its Rego tests, which every load runs in the server, are
//     compiled with the same capabilities (newTestRunner).
//   - No PHI in errors or logs: evaluation error details carry only OPA
//     error codes and policy locations, never input values.
//   - A bundle serves only if it is signed by a configured ES256 key, every
//     file in it is covered by the signature with its SHA-256 digest, it
//     holds Rego modules only, and its modules compile and its tests pass.
//     Before OPA's reader sees it, its archive is checked (checkArchive):
//     at most MaxBundleSize uncompressed, regular files and directories
//     only, clean relative names, no name twice; so a gzip bomb costs what
//     the check reads, and no link silently stands in for a module.
//   - No rollback past a signed claim: the ordering of bundles is the
//     sequence claim in the manifest (metadata.custos.sequence, signed with
//     the manifest; sequence.go), never the free-text revision. A Reloader
//     with rollback protection armed rejects a bundle whose claim is lower
//     than the high-water mark, equal to it for another bundle digest, or
//     absent once a claim has loaded ([CheckSequence]), or below the
//     operator's floor ([CheckMinSequence], which no override lowers); the
//     mark itself is kept by the caller in durable storage (custos: the
//     audit log).
//   - A policy directory is its .rego files outside hidden entries, each a
//     regular file: a Kubernetes ConfigMap volume loads once, a FIFO is
//     refused rather than waited on, and a link to a directory is refused
//     rather than silently left out with the rules in it.
//   - The server's own rules (the tenant boundary, binaries released whole
//     or not at all) are one pure function, [Enforce], which only ever turns
//     an allow into a denial; the server applies it to every decision about
//     a resource, and policy impact to every replayed one, so the two cannot
//     drift apart.
//   - nothing_visible only ever takes away: while it holds for a principal
//     and purpose, every list and read decision denies; when it does not,
//     decisions are exactly the policy's.
//   - A request never sees a half-loaded policy: engines are immutable and
//     published by one atomic pointer store. A request takes the current
//     engine once ([Reloader.Current]) and decides all its items with it.
package policy
