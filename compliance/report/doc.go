// Package report builds the auditor's compliance report ('custos
// compliance report'): from the records of an export bundle, the checks run
// over the live log, its retention scan and the compliance/ controls, it
// makes one Report, rendered as report.json and as one self-contained HTML
// page with inline SVG charts.
//
// # Traceability
//
// Every figure drawn from the period is counted from the records of the
// bundle the package includes (bundle/records.jsonl, exactly the log's
// records Manifest.From..To, proven complete by the bundle's signed
// checkpoints) and names them: a Figure is a count and the Seqs it counts
// ("1-5,9"), a Day or a Month is a contiguous seq range (record times never
// decrease), and Rules says, per JSON path, which records each figure
// selects. Recounting any figure is: take those lines of records.jsonl,
// apply the rule. Retention figures cover the whole log and name seq
// ranges of it, which `custos audit export --from-seq/--to-seq` and
// `custos audit prove` show.
//
// # Invariants
//
//   - Pure: Builder, LogScan, ControlsFrom and the renderers do no I/O
//     beyond the writer they are given. The log is read, under one access
//     record, by audit/access (OpCompliance: the checks, LogScan over
//     records 1..N, the bundle); the command builds the report from what
//     it returns and from the bundle's records.
//   - The report holds no raw patient id and no URI: patients are the
//     lookup values (keyed hashes) the log already holds, events carry
//     counts of patients, not their resources.
//   - A control is shown as passed only when a `go test -json` results file
//     was judged (compliance.CheckEvidence) and every test it names passed;
//     without results every control is StatusNotChecked.
//   - The HTML page loads nothing: no script, no external address, inline
//     CSS and SVG only, and a Content-Security-Policy of default-src 'none'
//     (style-src 'unsafe-inline') so that a browser would refuse any fetch.
//   - Output is deterministic for the same inputs (sorted maps, fixed
//     orders), so two runs over the same bundle compare equal but for
//     Generated.
package report
