package bundle

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-mcp/custos/audit"
)

// Format is a human-readable rendering written next to records.jsonl. It is
// derived from the records, and bound to them: Verify regenerates each
// human file from records.jsonl (what the signed checkpoints commit to) and
// compares it byte for byte.
type Format string

// Human formats and the bundle file each one is written to.
const (
	FormatCSV  Format = "csv"  // audit.csv: audit.CSVHeader columns, one row per record
	FormatFHIR Format = "fhir" // auditevent.ndjson: FHIR R4 AuditEvents (IHE BALP), one per line, one or more per record
	FormatOCSF Format = "ocsf" // ocsf.ndjson: one OCSF API Activity (class 6003) event per line
)

// FileName returns the bundle file name of a human format ("" if unknown).
func (f Format) FileName() string {
	switch f {
	case FormatCSV:
		return "audit.csv"
	case FormatFHIR:
		return "auditevent.ndjson"
	case FormatOCSF:
		return "ocsf.ndjson"
	}
	return ""
}

// Formats lists every human format, in the order Verify checks them.
var Formats = []Format{FormatCSV, FormatFHIR, FormatOCSF}

// header returns the bytes f writes before the first record: the CSV
// header row; nothing for the NDJSON formats.
func (f Format) header() ([]byte, error) {
	if f != FormatCSV {
		return nil, nil
	}
	return csvLine(audit.CSVHeader)
}

// render returns the bytes f writes for r, line ending(s) included. Write
// produces each human file as header() followed by render of every record,
// and Verify regenerates it the same way and compares byte for byte: a
// human file is bound to records.jsonl, which the signed checkpoint
// commits to.
func (f Format) render(r audit.Record) ([]byte, error) {
	return f.renderAs(r, rendererCurrent)
}

// renderer is a version of the human formats' rendering: the current one,
// or one of an earlier custos version that the verifier still recognizes
// (check 6, derived), so that the files of a bundle that version exported
// are not reported as changed after export. The versions are in release
// order, each named by the main commit whose build first wrote it: a
// rendering introduced by version X is made for every rd >= X, so an
// earlier version is the current code with the later changes left out.
// testdata/golden/renderers/<commit> holds each version's rendering of
// testdata/golden/renderers/records.tsv, written by that commit's own
// build (TestEarlierRenderersAreThoseBuilds).
type renderer int

const (
	// rendererA5f7443 is the rendering of a5f7443 to e4e2278 (2026-11-21
	// 23:05, when 'audit export --out' came, to 2026-11-25 01:00), before
	// the derived check: its CSV is renderer471441e's, its FHIR and OCSF
	// that version's own code, frozen in render_a5f7443.go (one
	// AuditEvent per record, not BALP-shaped).
	rendererA5f7443 renderer = iota
	// renderer471441e is the rendering of 471441e to d23f598 (2026-11-25
	// 01:00, when the derived check came, to 2026-12-05 00:47): record
	// text in AuditEvents as the record holds it (no fhirString), and CSV
	// defusing a formula at a cell's start only (csvRow471441e); and what
	// rendererC3d1398 lacks.
	renderer471441e
	// rendererF2704f7 is the rendering of f2704f7 (2026-12-05 00:48 to
	// 03:12), and of 13710ad (00:47) but for its CSV: AuditEvent text made
	// to fit FHIR's rules, and CSV defusing a formula at the start of a
	// cell and of each list element, with every formula start audit knows
	// (fullwidth signs, NUL, LF too), not after a ';' or tab inside a cell
	// (csvRowF2704f7); and what rendererC3d1398 lacks.
	rendererF2704f7
	// rendererC3d1398 is the rendering of c3d1398 (2026-12-05 03:12 to
	// 03:16): an auditor's access to the log was FHIR DCM 110100
	// Application Activity, action E; and what renderer24e9851 lacks.
	rendererC3d1398
	// renderer24e9851 is the rendering of 24e9851 to 298d70d (2026-12-05
	// 03:16 to 13:35): no aggregate count or window (FHIR period and
	// count, OCSF count, start_time, end_time), an audit/integrity failure
	// OCSF severity Medium, every patient entity under the keyed-hash
	// identifier system, and what renderer0ad50907 lacks.
	renderer24e9851
	// rendererAd50907 is the rendering of ad50907 (13:35 to 13:46): custos's
	// own acts (ownActs) had an IRCP user agent in FHIR, and every URI
	// entity was under the system urn:ietf:rfc:3986, "invalid" included;
	// and what rendererF35d06f lacks.
	rendererAd50907
	// rendererF35d06f is the rendering of f35d06f to 6da4927 (13:46 to
	// 15:36): custos's own acts were an untyped OCSF actor.user; and what
	// rendererBefore20261206 lacks.
	rendererF35d06f
	// rendererBefore20261206 is the rendering of fc8c97f to 44c72f8, before
	// probe-export3 (384f6a1): an auditor's access to the log had no audit
	// log entity in FHIR and was OCSF activity 99 Other, a backup was FHIR
	// Application Activity, and every OCSF event named the API service
	// "mcp"; and what renderer384f6a1 lacks.
	rendererBefore20261206
	// renderer384f6a1 is the rendering of 384f6a1 to 27b3d0f (2026-12-06
	// 02:48 to 15:52): the query event of a patient named only the result
	// URIs holding that patient, so a URI naming no patient of the record
	// (a tenant's reference data; a FHIR import's URI whose patient
	// segment the server could not resolve to the patient id) was in no
	// event.
	renderer384f6a1
	// renderer0a0ff79 is the rendering of 0a0ff79 to 264c3fa (h-review42,
	// 2026-12-06 from 17:02): a result URI naming none of the record's
	// patients was in the query event of every patient of the record, so
	// with several patients a URI in the compartment of one of them (a
	// FHIR import's URI whose patient segment the server could not resolve
	// to the patient id) was named in the other patients' events too; and
	// what renderer384f6a1 lacks.
	renderer0a0ff79
	// renderer311e1f4 is the rendering of 311e1f4 to e4efd0a (h-review45,
	// 2026-12-06 from 17:53): CSV cells kept format characters (bidi
	// controls, zero-width characters) as stored (csvRowKeepFormat); and
	// what renderer0a0ff79 lacks.
	renderer311e1f4
	// rendererBf44145 is the rendering of bf44145 to c36f872 (h-audit12,
	// 2026-12-06 from 19:50): CSV cells escaped format characters only,
	// and kept control characters (ESC, C1, a vertical tab) and the line
	// and paragraph separators as stored (csvRowFormatOnly); and what
	// renderer311e1f4 lacks.
	rendererBf44145
	// renderer486663c is the rendering of 486663c to dedf758 (h-review48,
	// 2026-12-06 20:22 to 2026-12-07 13:28): an AuditEvent's patient entity
	// named the patient by identifier only, and the principal's agent had
	// no name, so a FHIR server's patient and agent-name searches found no
	// event (searchable; agent.policy, which R4's policy search reads, is
	// still left out: BALP prohibits it there); and what rendererBf44145
	// lacks.
	renderer486663c
	// rendererCurrent is this version's rendering, since h-auditfhir.
	rendererCurrent
)

// earlierRenderers are the renderings of earlier custos versions the
// verifier accepts, newest first.
var earlierRenderers = []renderer{renderer486663c, rendererBf44145, renderer311e1f4, renderer0a0ff79, renderer384f6a1, rendererBefore20261206, rendererF35d06f, rendererAd50907, renderer24e9851, rendererC3d1398, rendererF2704f7, renderer471441e, rendererA5f7443}

// renderAs is render by renderer rd.
func (f Format) renderAs(r audit.Record, rd renderer) ([]byte, error) {
	switch f {
	case FormatCSV:
		switch {
		case rd < rendererF2704f7:
			return csvLine(csvRow471441e(r))
		case rd == rendererF2704f7:
			return csvLine(csvRowF2704f7(r))
		case rd < rendererBf44145:
			return csvLine(csvRowKeepFormat(r))
		case rd == rendererBf44145:
			return csvLine(csvRowFormatOnly(r))
		}
		return csvLine(CSVRow(r))
	case FormatFHIR:
		if rd == rendererA5f7443 {
			ev, err := fhirAuditEventsA5f7443(r)
			return append(ev, '\n'), err
		}
		evs, err := fhirAuditEvents(r, rd)
		var b []byte
		for _, ev := range evs {
			b = append(append(b, ev...), '\n')
		}
		return b, err
	case FormatOCSF:
		render := func(r audit.Record) ([]byte, error) { return ocsfAPIActivity(r, rd) }
		if rd == rendererA5f7443 {
			render = ocsfAPIActivityA5f7443
		}
		ev, err := render(r)
		return append(ev, '\n'), err
	}
	return nil, fmt.Errorf("bundle: unknown format %q", f)
}

// csvRow471441e is CSVRow as renderer471441e made it: list cells joined
// with ";" as they are, and a cell beginning with =, +, -, @, a tab or a
// carriage return prefixed with "'".
func csvRow471441e(r audit.Record) []string {
	row := csvCells(r, func(s []string) string { return strings.Join(s, ";") })
	for i, cell := range row {
		if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
			row[i] = "'" + cell
		}
	}
	return row
}

// csvRowF2704f7 is CSVRow as rendererF2704f7 made it: a cell, and each
// element of a list cell, beginning with a formula start is prefixed with
// "'" (csvSafeStart); a formula after a ';' or a tab inside a cell is left
// as it is.
func csvRowF2704f7(r audit.Record) []string {
	row := csvCells(r, func(s []string) string {
		safe := make([]string, len(s))
		for i, e := range s {
			safe[i] = csvSafeStart(e)
		}
		return strings.Join(safe, ";")
	})
	for i, cell := range row {
		row[i] = csvSafeStart(cell)
	}
	return row
}

// csvSafeStart prefixes s with "'" when its first character is a formula
// start, as audit.CSVSafe knows them (audit.CSVSafe of that character alone
// differs from it).
func csvSafeStart(s string) string {
	_, size := utf8.DecodeRuneInString(s)
	if s != "" && audit.CSVSafe(s[:size]) != s[:size] {
		return "'" + s
	}
	return s
}

// csvLine encodes one CSV record as encoding/csv writes it ("\n" line
// ending, quoting as needed; a cell may hold a newline inside quotes).
func csvLine(cells []string) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(cells); err != nil {
		return nil, err
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// recordHash returns r.Hash, computing it when the record did not come
// from audit.Decode.
func recordHash(r audit.Record) string {
	if r.Hash != "" {
		return r.Hash
	}
	return audit.HashRecord(audit.Encode(r))
}

// CSVRow returns the CSV row of r in audit.CSVHeader's column order (the
// layout of `custos audit export --format csv`): list fields joined by ";",
// each cell written by audit.CSVCell (a cell, or a part of it after a ";"
// or a tab, that a spreadsheet would evaluate is prefixed with a single
// quote; a format character, a bidi control among them, a control
// character and a line or paragraph separator is written as its escape,
// \u202e, \x1b, \u2028).
func CSVRow(r audit.Record) []string {
	row := csvCells(r, audit.CSVList)
	for i, cell := range row {
		row[i] = audit.CSVCell(cell)
	}
	return row
}

// csvRowFormatOnly is CSVRow as renderer bf44145 made it: format
// characters escaped (audit.CSVVisibleFormat), control characters and
// separators as stored.
func csvRowFormatOnly(r audit.Record) []string {
	row := csvCells(r, audit.CSVList)
	for i, cell := range row {
		row[i] = audit.CSVSafe(audit.CSVVisibleFormat(cell))
	}
	return row
}

// csvRowKeepFormat is CSVRow as renderers c3d1398 to 311e1f4 made it:
// format characters kept as stored (audit.CSVSafe alone).
func csvRowKeepFormat(r audit.Record) []string {
	row := csvCells(r, audit.CSVList)
	for i, cell := range row {
		row[i] = audit.CSVSafe(cell)
	}
	return row
}

// csvCells returns the cells of r's row in the order of the header, each
// list joined by list, as stored.
func csvCells(r audit.Record, list func([]string) string) []string {
	j := list
	return []string{
		strconv.Itoa(r.V), strconv.FormatUint(r.Seq, 10), r.EventID, r.Time.UTC().Format(audit.TimeLayout), r.Node,
		r.Action, r.Outcome, r.Reason,
		r.Principal.Sub, j(r.Principal.Roles), r.Principal.ClientID, r.PurposeOfUse, r.Session, r.Source,
		j(r.URIs), j(r.Patients), j(r.Digests), r.DecisionID, r.PolicyRevision,
		j(r.Obligations), strconv.FormatBool(r.Dev), j(r.Keys), r.PrevHash, recordHash(r),
	}
}

// OCSF constants: class API Activity (6003) in category Application
// Activity (6).
const (
	ocsfVersion       = "1.3.0"
	ocsfClassUID      = 6003
	ocsfCategoryUID   = 6
	ocsfActivityRead  = 2
	ocsfActivityOther = 99
	ocsfUserUnknown   = 0 // user.type_id Unknown
	ocsfUserSystem    = 3 // user.type_id System: a system account, custos's own acts (ownAct)
)

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
}

type ocsfMetadata struct {
	Version       string      `json:"version"`
	Product       ocsfProduct `json:"product"`
	UID           string      `json:"uid"`
	Sequence      uint64      `json:"sequence"`
	LogName       string      `json:"log_name"`
	OriginalTime  string      `json:"original_time"`
	CorrelationID string      `json:"correlation_uid,omitempty"`
}

type ocsfGroup struct {
	Name string `json:"name"`
}

type ocsfUser struct {
	UID    string      `json:"uid,omitempty"`
	Name   string      `json:"name,omitempty"`
	TypeID *int        `json:"type_id,omitempty"`
	Type   string      `json:"type,omitempty"`
	Groups []ocsfGroup `json:"groups,omitempty"`
}

type ocsfSession struct {
	UID string `json:"uid"`
}

type ocsfActor struct {
	User    *ocsfUser    `json:"user,omitempty"`
	AppName string       `json:"app_name,omitempty"`
	Session *ocsfSession `json:"session,omitempty"`
}

type ocsfService struct {
	Name string `json:"name"`
}

type ocsfAPI struct {
	Operation string       `json:"operation"`
	Service   *ocsfService `json:"service,omitempty"`
}

// mcpActions are the actions of records of a request to the MCP endpoint
// (an MCP method, or an HTTP refusal there: server.ActionAuthReject,
// ActionRateLimited) or of a notification sent over it (server's
// ActionComplete, ActionSubscribe, ActionUnsubscribe, ActionNotify; copied,
// audit/bundle does not import server;
// TestOCSFServiceIsMCPOnlyForMCPRequests): their OCSF events name the API
// service "mcp". The other records (auditors' accesses, break-the-glass,
// policy loads, syncs, restores, retirements, integrity failures) were of
// no MCP request.
var mcpActions = []string{audit.ActionResourcesRead, audit.ActionResourcesList, audit.ActionResourcesTemplatesList,
	"complete", "subscribe", "unsubscribe", "notify", actionAuthReject, actionRateLimited}

type ocsfEndpoint struct {
	Name string `json:"name,omitempty"`
	IP   string `json:"ip,omitempty"`
	Port int    `json:"port,omitempty"`
}

type ocsfResource struct {
	UID  string `json:"uid"`
	Type string `json:"type"`
}

type ocsfUnmapped struct {
	V              int      `json:"v"`
	Node           string   `json:"node"`
	Hash           string   `json:"hash"`
	PrevHash       string   `json:"prev_hash"`
	PurposeOfUse   string   `json:"purpose_of_use"`
	DecisionID     string   `json:"decision_id"`
	PolicyRevision string   `json:"policy_revision"`
	Digests        []string `json:"digests"`
	Obligations    []string `json:"obligations"`
	Dev            bool     `json:"dev"`
	Keys           []string `json:"keys"`
}

type ocsfEvent struct {
	ClassUID     int            `json:"class_uid"`
	ClassName    string         `json:"class_name"`
	CategoryUID  int            `json:"category_uid"`
	CategoryName string         `json:"category_name"`
	ActivityID   int            `json:"activity_id"`
	ActivityName string         `json:"activity_name"`
	TypeUID      int            `json:"type_uid"`
	TypeName     string         `json:"type_name"`
	Time         int64          `json:"time"`
	TZOffset     int            `json:"timezone_offset"`
	SeverityID   int            `json:"severity_id"`
	Severity     string         `json:"severity"`
	StatusID     int            `json:"status_id"`
	Status       string         `json:"status"`
	StatusCode   string         `json:"status_code,omitempty"`
	StatusDetail string         `json:"status_detail,omitempty"`
	Count        *int64         `json:"count,omitempty"`
	StartTime    *int64         `json:"start_time,omitempty"`
	EndTime      *int64         `json:"end_time,omitempty"`
	Metadata     ocsfMetadata   `json:"metadata"`
	Actor        ocsfActor      `json:"actor"`
	API          ocsfAPI        `json:"api"`
	SrcEndpoint  ocsfEndpoint   `json:"src_endpoint"`
	Resources    []ocsfResource `json:"resources,omitempty"`
	Unmapped     ocsfUnmapped   `json:"unmapped"`
}

// OCSFAPIActivity renders r as an OCSF API Activity event (class_uid 6003,
// category_uid 6, OCSF 1.3.0): activity_id 2 (Read) for resources/read,
// resources/list and resources/templates/list and an auditor's access to
// the audit log (auditLogUses, DICOM Audit Log Used in FHIR), 99 (Other,
// activity_name = the action) otherwise; type_uid = 600300 + activity_id; time in Unix
// milliseconds; status_id 1 (Success) for allow and 2 (Failure) for deny or
// error, with status_code the outcome and status_detail the reason;
// severity_id 1 (Informational) for allow, 2 (Low) for deny, 3 (Medium) for
// error, but 5 (Critical) for an audit/integrity error (the audit log was
// found broken); type_name "API Activity: Read" or "API Activity: Other";
// timezone_offset 0 (times are UTC); for an aggregate refusal record
// (aggregateOf) count = the refusals it stands for and start_time,
// end_time = its window, in Unix milliseconds. metadata.uid is the event_id and
// metadata.sequence the seq; actor.user.uid the principal sub (roles as
// groups), typed type_id 3 "System" for an act of custos itself (ownAct:
// the acts the FHIR export gives a DCM 110150 Application agent) and
// untyped for a person, or, for a record with no principal (a request
// refused before authentication), the user {name "unauthenticated",
// type_id 0 Unknown};
// actor.app_name the client_id, api.operation the action (api.service
// "mcp" for a record of an MCP request, mcpActions, none otherwise),
// src_endpoint the
// record's source (ip and port, or its label as name; the node when
// empty), resources the URIs and patients; the rest (hash, prev_hash,
// purpose of use, policy decision, digests, obligations, keys) is in
// unmapped. No OCSF attribute is an empty string: what the record lacks is
// left out.
func OCSFAPIActivity(r audit.Record) ([]byte, error) {
	return ocsfAPIActivity(r, rendererCurrent)
}

// ocsfAPIActivity is OCSFAPIActivity by renderer rd.
func ocsfAPIActivity(r audit.Record, rd renderer) ([]byte, error) {
	ev := ocsfEvent{
		ClassUID:     ocsfClassUID,
		ClassName:    "API Activity",
		CategoryUID:  ocsfCategoryUID,
		CategoryName: "Application Activity",
		Time:         r.Time.UnixMilli(),
		StatusCode:   r.Outcome,
		StatusDetail: r.Reason,
		Metadata: ocsfMetadata{
			Version:       ocsfVersion,
			Product:       ocsfProduct{Name: "custos", VendorName: "custos"},
			UID:           r.EventID,
			Sequence:      r.Seq,
			LogName:       "audit",
			OriginalTime:  r.Time.UTC().Format(audit.TimeLayout),
			CorrelationID: r.DecisionID,
		},
		Actor: ocsfActor{AppName: r.Principal.ClientID},
		API:   ocsfAPI{Operation: r.Action},
		Unmapped: ocsfUnmapped{
			V: r.V, Node: r.Node, Hash: recordHash(r), PrevHash: r.PrevHash,
			PurposeOfUse: r.PurposeOfUse, DecisionID: r.DecisionID, PolicyRevision: r.PolicyRevision,
			Digests: nonNil(r.Digests), Obligations: nonNil(r.Obligations), Dev: r.Dev, Keys: nonNil(r.Keys),
		},
	}
	switch {
	case r.Action == audit.ActionResourcesRead, r.Action == audit.ActionResourcesList, r.Action == audit.ActionResourcesTemplatesList,
		rd >= renderer384f6a1 && slices.Contains(auditLogUses, r.Action): // an auditor's read of the audit log, action R in FHIR
		ev.ActivityID, ev.ActivityName = ocsfActivityRead, "Read"
	default:
		ev.ActivityID, ev.ActivityName = ocsfActivityOther, r.Action
	}
	if rd < renderer384f6a1 || slices.Contains(mcpActions, r.Action) {
		ev.API.Service = &ocsfService{Name: "mcp"}
	}
	ev.TypeUID = ocsfClassUID*100 + ev.ActivityID
	ev.TypeName = "API Activity: " + pick(ev.ActivityID == ocsfActivityRead, "Read", "Other")
	switch r.Outcome {
	case audit.OutcomeAllow:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 1, "Success", 1, "Informational"
	case audit.OutcomeDeny:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 2, "Failure", 2, "Low"
	default:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 2, "Failure", 3, "Medium"
	}
	if r.Action == actionIntegrity && r.Outcome == audit.OutcomeError && rd >= rendererAd50907 {
		// The audit log itself was found broken: the evidence is in
		// doubt, as critical as the alert operations raise on it.
		ev.SeverityID, ev.Severity = 5, "Critical"
	}
	if r.Principal.Sub != "" {
		ev.Actor.User = &ocsfUser{UID: r.Principal.Sub}
		if ownAct(r) && rd >= rendererBefore20261206 {
			// custos itself, not a person: OCSF's system account type, as
			// the FHIR export's DCM 110150 Application agent.
			system := ocsfUserSystem
			ev.Actor.User.TypeID, ev.Actor.User.Type = &system, "System"
		}
		for _, g := range r.Principal.Roles {
			if g != "" {
				ev.Actor.User.Groups = append(ev.Actor.User.Groups, ocsfGroup{Name: g})
			}
		}
	} else {
		// A request refused before authentication has no principal; OCSF
		// requires an actor: a user of unknown type, named for what it is.
		unknown := ocsfUserUnknown
		ev.Actor.User = &ocsfUser{Name: "unauthenticated", TypeID: &unknown, Type: "Unknown"}
	}
	if agg, ok := aggregateOf(r); ok && rd >= rendererAd50907 {
		start, end := agg.start.UnixMilli(), agg.end.UnixMilli()
		ev.Count, ev.StartTime, ev.EndTime = &agg.count, &start, &end
	}
	if r.Session != "" {
		ev.Actor.Session = &ocsfSession{UID: r.Session}
	}
	ev.SrcEndpoint = ocsfEndpointOf(r.Source, r.Node)
	for _, u := range r.URIs {
		if u != "" {
			ev.Resources = append(ev.Resources, ocsfResource{UID: u, Type: "mcp_resource"})
		}
	}
	for _, p := range r.Patients {
		if p != "" {
			ev.Resources = append(ev.Resources, ocsfResource{UID: p, Type: "patient"})
		}
	}
	return marshalLine(ev)
}

// ocsfEndpointOf is src_endpoint: ip and port when the source is an
// address; otherwise the source's label as name (stdio, oauth, btg, ...),
// or the node for a record with no source (OCSF requires one of them).
func ocsfEndpointOf(source, node string) ocsfEndpoint {
	host, port, err := net.SplitHostPort(source)
	if err == nil && net.ParseIP(host) != nil {
		p, _ := strconv.Atoi(port)
		return ocsfEndpoint{IP: host, Port: p}
	}
	if net.ParseIP(source) != nil {
		return ocsfEndpoint{IP: source}
	}
	if source == "" {
		return ocsfEndpoint{Name: pick(node != "", node, "custos")}
	}
	return ocsfEndpoint{Name: source}
}

// aggregate is what an aggregate refusal record stands for: count
// refusals in the window [start, end] (UTC).
type aggregate struct {
	count      int64
	start, end time.Time
}

// aggregateOf reports whether r is an aggregate refusal record and what it
// counts. The server (server/refusals.go) records the first refusal of a
// kind in a window on its own and the others in one record, outcome deny
// or error, whose reason is the refusal's reason followed by
// ",aggregate,count=N,window=START/END" (docs/audit-format.md, "Aggregate
// refusal records"): N at least 1, START and END RFC 3339, START not after
// END. Only the refusals the server aggregates count — auth/reject and
// http/rate_limited denials, and disk_low errors of any action — and only
// with a reason of exactly that form; anything else (another action, whose
// reason may hold text a policy error or an operator wrote; a malformed
// count or window) is an ordinary record, exported as one event. It is
// pure.
func aggregateOf(r audit.Record) (aggregate, bool) {
	const mark = "," + reasonAggregate + ",count="
	switch {
	case r.Outcome == audit.OutcomeDeny && (r.Action == actionAuthReject || r.Action == actionRateLimited):
	case r.Outcome == audit.OutcomeError && strings.HasPrefix(r.Reason, reasonDiskLow+","):
	default:
		return aggregate{}, false
	}
	i := strings.LastIndex(r.Reason, mark)
	if i <= 0 {
		return aggregate{}, false
	}
	n, window, ok := strings.Cut(r.Reason[i+len(mark):], ",window=")
	if !ok || n == "" || len(n) > 18 || strings.Trim(n, "0123456789") != "" || n[0] == '0' {
		return aggregate{}, false
	}
	count, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return aggregate{}, false
	}
	s, e, ok := strings.Cut(window, "/")
	if !ok {
		return aggregate{}, false
	}
	start, err1 := time.Parse(time.RFC3339, s)
	end, err2 := time.Parse(time.RFC3339, e)
	if err1 != nil || err2 != nil || end.Before(start) {
		return aggregate{}, false
	}
	return aggregate{count: count, start: start.UTC(), end: end.UTC()}, true
}

// AggregateCount returns N, the refusals r stands for, when r is an
// aggregate refusal record as the exports recognize one (aggregateOf); for
// any other record it returns false (the record stands for one request).
// The compliance report counts refused requests with it, so that the
// report and the exports agree on which records are aggregates.
func AggregateCount(r audit.Record) (int64, bool) {
	agg, ok := aggregateOf(r)
	return agg.count, ok
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// marshalLine encodes v as compact JSON without HTML escaping and without
// a trailing newline.
func marshalLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
