package bundle

import (
	"encoding/base64"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-mcp/custos/audit"
)

// FHIR code systems, identifier systems and the IHE BALP profiles used by
// FHIRAuditEvents. The profile rules followed are those of IHE ITI Basic
// Audit Log Patterns (BALP) 1.1: IHE.BasicAudit.Read, PatientRead, Query and
// PatientQuery (input/fsh/PatientRead.fsh and PatientQuery.fsh of
// github.com/IHE/ITI.BasicAudit).
const (
	fhirAuditEventType   = "http://terminology.hl7.org/CodeSystem/audit-event-type"
	fhirRestful          = "http://hl7.org/fhir/restful-interaction"
	fhirDICOM            = "http://dicom.nema.org/resources/ontology/DCM"
	fhirParticipation    = "http://terminology.hl7.org/CodeSystem/v3-ParticipationType"
	fhirEntityType       = "http://terminology.hl7.org/CodeSystem/audit-entity-type"
	fhirObjectRole       = "http://terminology.hl7.org/CodeSystem/object-role"
	fhirSourceType       = "http://terminology.hl7.org/CodeSystem/security-source-type"
	fhirActReason        = "http://terminology.hl7.org/CodeSystem/v3-ActReason"
	fhirNetworkType      = "http://hl7.org/fhir/network-type"
	fhirURI              = "urn:ietf:rfc:3986"
	balpPatientRead      = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientRead"
	balpRead             = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read"
	balpPatientQuery     = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientQuery"
	balpQuery            = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query"
	custosAuditRecordExt = "https://github.com/custos-mcp/custos/fhir/StructureDefinition/audit-record"
	custosPatientHash    = "https://github.com/custos-mcp/custos/fhir/NamingSystem/audit-patient-keyed-hash"
	custosAuditLog       = "https://github.com/custos-mcp/custos/fhir/NamingSystem/audit-log" // an audit log, named by its node
	actionAuthReject     = "auth/reject"                                                      // server.ActionAuthReject: an HTTP request refused before MCP
	actionIntegrity      = "audit/integrity"                                                  // scrub.Action: the audit log was found broken
	actionRateLimited    = "http/rate_limited"                                                // server.ActionRateLimited: a request over a rate or session limit
	reasonDiskLow        = "disk_low"                                                         // server.ReasonDiskLow: refused while the audit volume is in its reserve
	reasonAggregate      = "aggregate"                                                        // server.ReasonAggregate: the mark of an aggregate refusal record's reason
)

// ownActs are the actions custos records as acts of its own, each with
// the principal it records them under (TestServerNamesAgree keeps the
// actions equal to their writers' names): a URI retired from the catalog
// (server.ActionRetire), a policy loaded or rejected (server.ActionPolicyLoad,
// ActionPolicyReject), a break-the-glass grant expired (btg.KindExpire),
// the audit log found broken (scrub.Action): "custos"; a scheduled FHIR
// sync (fhirsync.ActionSyncStart, ActionSyncEnd; app/sync.go): "custos-serve".
// The same principal on another action (an OAuth subject "custos") is a
// person, and so is an OS account that asked for a sync.
var ownActs = map[string]string{
	"catalog/retire": "custos",
	"policy/load":    "custos",
	"policy/reject":  "custos",
	"btg/expire":     "custos",
	actionIntegrity:  "custos",
	"sync/start":     "custos-serve",
	"sync/end":       "custos-serve",
}

// ownAct reports whether r records an act of custos itself (ownActs).
func ownAct(r audit.Record) bool {
	sub, ok := ownActs[r.Action]
	return ok && r.Principal.Sub == sub
}

// agentApplication is the agent type of custos acting on its own: DICOM's
// software application role, which IHE BALP uses for an application agent
// (IHE.IUA.71, agent[client]).
var agentApplication = fhirCoding{System: fhirDICOM, Code: "110150", Display: "Application"}

// auditLogUses are the actions of the records of an auditor's access to
// the audit log (audit.LogUseActions; TestAuditLogUsesAreTheAccessActions
// keeps them equal to audit/access's Action* constants): DICOM 110101
// Audit Log Used events.
var auditLogUses = audit.LogUseActions

// auditLogEntity is the participant object DICOM PS3.15 A.5.3.2 makes
// mandatory in an Audit Log Used event, the identity of the audit log:
// System Object (2) in role Security Resource (13), named "Security Audit
// Log". DICOM identifies it by its URI; a record holds none (the log's
// checkpoint origin, <deployment>/<node>/audit, is not in it either), so
// the log is named by the node whose log it is, under custosAuditLog
// (none when the record has no node).
func auditLogEntity(node string) fhirEntity {
	e := fhirEntity{
		Type: &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
		Role: &fhirCoding{System: fhirObjectRole, Code: "13", Display: "Security Resource"},
		Name: "Security Audit Log",
	}
	if node = fhirString(node); node != "" {
		e.What = &fhirReference{Identifier: &fhirIdentifier{System: custosAuditLog, Value: node}}
	}
	return e
}

// DICOM roles of the two network agents (DCM 110153, 110152).
var (
	roleSource      = fhirCoding{System: fhirDICOM, Code: "110153", Display: "Source Role ID"}
	roleDestination = fhirCoding{System: fhirDICOM, Code: "110152", Display: "Destination Role ID"}
)

type fhirCoding struct {
	System  string `json:"system,omitempty"`
	Code    string `json:"code,omitempty"`
	Display string `json:"display,omitempty"`
}

type fhirConcept struct {
	Coding []fhirCoding `json:"coding,omitempty"`
	Text   string       `json:"text,omitempty"`
}

type fhirIdentifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value"`
}

type fhirReference struct {
	Reference  string          `json:"reference,omitempty"`
	Type       string          `json:"type,omitempty"`
	Identifier *fhirIdentifier `json:"identifier,omitempty"`
	Display    string          `json:"display,omitempty"`
}

type fhirNetwork struct {
	Address string `json:"address"`
	Type    string `json:"type"`
}

type fhirAgent struct {
	Type         *fhirConcept   `json:"type,omitempty"`
	Role         []fhirConcept  `json:"role,omitempty"`
	Who          *fhirReference `json:"who,omitempty"`
	Name         string         `json:"name,omitempty"`
	Requestor    bool           `json:"requestor"`
	Network      *fhirNetwork   `json:"network,omitempty"`
	PurposeOfUse []fhirConcept  `json:"purposeOfUse,omitempty"`
}

type fhirSource struct {
	Site     string        `json:"site,omitempty"`
	Observer fhirReference `json:"observer"`
	Type     []fhirCoding  `json:"type,omitempty"`
}

type fhirEntity struct {
	What        *fhirReference `json:"what,omitempty"`
	Type        *fhirCoding    `json:"type,omitempty"`
	Role        *fhirCoding    `json:"role,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Query       string         `json:"query,omitempty"` // base64Binary
}

type fhirExtension struct {
	URL         string          `json:"url"`
	ValueString string          `json:"valueString,omitempty"`
	Extension   []fhirExtension `json:"extension,omitempty"`
}

type fhirPeriod struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

type fhirMeta struct {
	Profile []string `json:"profile"`
}

type fhirAuditEvent struct {
	ResourceType   string          `json:"resourceType"`
	ID             string          `json:"id,omitempty"`
	Meta           *fhirMeta       `json:"meta,omitempty"`
	Extension      []fhirExtension `json:"extension"`
	Type           fhirCoding      `json:"type"`
	Subtype        []fhirCoding    `json:"subtype,omitempty"`
	Action         string          `json:"action"`
	Period         *fhirPeriod     `json:"period,omitempty"`
	Recorded       string          `json:"recorded"`
	Outcome        string          `json:"outcome"`
	OutcomeDesc    string          `json:"outcomeDesc,omitempty"`
	PurposeOfEvent []fhirConcept   `json:"purposeOfEvent,omitempty"`
	Agent          []fhirAgent     `json:"agent"`
	Source         fhirSource      `json:"source"`
	Entity         []fhirEntity    `json:"entity,omitempty"`
}

// balpKind is the BALP pattern a record's action follows.
type balpKind int

const (
	kindOther balpKind = iota // DICOM Application Activity (or User Authentication): no BALP profile
	kindRead                  // resources/read: Read / PatientRead
	kindQuery                 // resources/list, resources/templates/list: Query / PatientQuery
)

func balpKindOf(action string) balpKind {
	switch action {
	case audit.ActionResourcesRead:
		return kindRead
	case audit.ActionResourcesList, audit.ActionResourcesTemplatesList:
		return kindQuery
	}
	return kindOther
}

// FHIRAuditEvents renders r as FHIR R4 AuditEvents following the IHE Basic
// Audit Log Patterns (BALP). One record gives one event, except that a
// read or a list concerning several patients gives one event per patient
// (BALP PatientRead and PatientQuery name exactly one patient), with ids
// "<event_id>-1" ... "<event_id>-N" instead of the event_id.
//
//   - resources/read: the Read pattern: type audit-event-type#rest, subtype
//     restful-interaction#read, action R; agents client = DCM 110152
//     Destination Role ID (the data flows to it), server = DCM 110153
//     Source Role ID; entity data (audit-entity-type#2 System Object,
//     object-role#4 Domain Resource, what = the URI, under the identifier
//     system urn:ietf:rfc:3986 only if it is one, isURI) and, when patients are
//     concerned, entity patient (#1 Person, object-role#1 Patient; what =
//     the reference Patient/<the record's value> when it is a FHIR id, as
//     a keyed hash is, and its identifier: searchable).
//   - resources/list, resources/templates/list: the Query pattern: subtype
//     search, action E; client = 110153 Source Role ID, server = 110152
//     Destination Role ID (the DICOM/IHE convention for queries); entity
//     query (#2, object-role#24 Query) with query = base64 of the MCP
//     method (custos lists take no parameters but an opaque cursor, which
//     is not recorded) and the method as description; the results are not
//     entities (BALP records the query, not its results): the URIs naming
//     the event's patient, and those naming no patient of the record (all
//     of them when the event has no patient), are in the custos extension
//     (urisOf).
//   - auth/reject: DCM 110114 User Authentication, subtype DCM 110122
//     Login, action E; an auditor's access to the log (auditLogUses):
//     DCM 110101 Audit Log Used, action R, with the audit log as an
//     entity (auditLogEntity); any other action: DCM 110100 Application
//     Activity, action E; every patient and URI as entities.
//
// The user agent (v3-ParticipationType#IRCP, requestor, roles, purpose of
// use, name = who = the sub: searchable) is present when the record names
// a principal; for an act of
// custos itself (ownActs) it is the application agent, DCM 110150
// Application, who a Device. outcome is 0 for
// allow, 4 (minor failure) for deny, 8 (serious failure) for error, with
// the reason in outcomeDesc. meta.profile claims the BALP profile only for
// a successful read or query that carries everything the profile requires:
// BALP's profiles fix outcome 0, so a denial or an error follows the
// pattern without claiming it, as BALP says failures do; and a record
// whose client address is unknown (a source naming a component, or the
// "oauth" that logs before the peer address was recorded carry) cannot
// fill agent[client].network (1..1).
//
// An aggregate refusal record (aggregateOf), which stands for N refusals
// in a window, has the window as period and N as the extension's count.
//
// The extension custosAuditRecordExt carries seq, hash, prev_hash, action,
// decision_id, policy_revision, session, digests, obligations and keys, so
// that every event traces back to its signed record. No element is an
// empty string (FHIR forbids them): what the record lacks is left out.
func FHIRAuditEvents(r audit.Record) ([][]byte, error) {
	return fhirAuditEvents(r, rendererCurrent)
}

// isAuditLogUse reports whether renderer rd renders action as DICOM Audit
// Log Used (before 2026-12-06 a backup was Application Activity, and
// before 24e9851 every auditor's access).
func isAuditLogUse(action string, rd renderer) bool {
	return slices.Contains(auditLogUses, action) && rd >= renderer24e9851 && (rd >= renderer384f6a1 || action != "backup")
}

// fhirAuditEvents is FHIRAuditEvents by renderer rd.
func fhirAuditEvents(r audit.Record, rd renderer) ([][]byte, error) {
	kind := balpKindOf(r.Action)
	groups := [][]string{r.Patients} // the patients of each event
	if kind != kindOther && len(r.Patients) > 1 {
		groups = groups[:0]
		for _, p := range r.Patients {
			groups = append(groups, []string{p})
		}
		if kind == kindQuery && rd >= renderer311e1f4 && len(strayURIs(r.URIs, r.Patients)) > 0 {
			groups = append(groups, nil) // the query event of the stray URIs, no patient's
		}
	}
	out := make([][]byte, 0, len(groups))
	for i, patients := range groups {
		ev := fhirEvent(r, kind, patients, rd)
		if len(groups) > 1 {
			ev.ID = r.EventID + "-" + strconv.Itoa(i+1)
			ev.Extension[0].Extension = append(ev.Extension[0].Extension,
				fhirExtension{URL: "part", ValueString: strconv.Itoa(i+1) + "/" + strconv.Itoa(len(groups))})
		}
		b, err := marshalLine(ev)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// fhirEvent renders the event of r concerning patients.
func fhirEvent(r audit.Record, kind balpKind, patients []string, rd renderer) fhirAuditEvent {
	str, code, required := fhirText(rd)
	ev := fhirAuditEvent{
		ResourceType: "AuditEvent",
		ID:           r.EventID,
		Recorded:     r.Time.UTC().Format(audit.TimeLayout),
		OutcomeDesc:  str(r.Reason),
		Source: fhirSource{
			Site:     str(r.Node),
			Observer: deviceRef(r.Node, str),
			Type:     []fhirCoding{{System: fhirSourceType, Code: "4", Display: "Application Server"}},
		},
	}
	switch kind {
	case kindRead:
		ev.Type = fhirCoding{System: fhirAuditEventType, Code: "rest", Display: "Restful Operation"}
		ev.Subtype = []fhirCoding{{System: fhirRestful, Code: "read", Display: "read"}}
		ev.Action = "R"
	case kindQuery:
		ev.Type = fhirCoding{System: fhirAuditEventType, Code: "rest", Display: "Restful Operation"}
		ev.Subtype = []fhirCoding{{System: fhirRestful, Code: "search", Display: "search"}}
		ev.Action = "E"
	default:
		ev.Type = fhirCoding{System: fhirDICOM, Code: "110100", Display: "Application Activity"}
		ev.Action = "E"
		switch {
		case r.Action == actionAuthReject:
			ev.Type = fhirCoding{System: fhirDICOM, Code: "110114", Display: "User Authentication"}
			ev.Subtype = []fhirCoding{{System: fhirDICOM, Code: "110122", Display: "Login"}}
		case isAuditLogUse(r.Action, rd):
			ev.Type = fhirCoding{System: fhirDICOM, Code: "110101", Display: "Audit Log Used"}
			ev.Action = "R"
		}
	}
	switch r.Outcome {
	case audit.OutcomeAllow:
		ev.Outcome = "0"
	case audit.OutcomeDeny:
		ev.Outcome = "4"
	default:
		ev.Outcome = "8"
	}
	var purpose []fhirConcept
	if c := code(r.PurposeOfUse); c != "" {
		purpose = []fhirConcept{{Coding: []fhirCoding{{System: fhirActReason, Code: c}}}}
		ev.PurposeOfEvent = purpose
	}

	// Agents. Read: the data flows from the server (source) to the client
	// (destination). Query and the rest: the request flows from the client
	// (source) to the server (destination), the DICOM/IHE convention.
	clientRole, serverRole := roleSource, roleDestination
	if kind == kindRead {
		clientRole, serverRole = roleDestination, roleSource
	}
	hasUser := r.Principal.Sub != ""
	client := fhirAgent{
		Type:      &fhirConcept{Coding: []fhirCoding{clientRole}},
		Requestor: !hasUser, // with no principal the client application is the only requestor known
		Network:   clientNetwork(r.Source, r.Node),
	}
	if id := str(r.Principal.ClientID); id != "" {
		client.Who = &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: id}}
	}
	server := fhirAgent{
		Type: &fhirConcept{Coding: []fhirCoding{serverRole}},
	}
	if node := str(r.Node); node != "" {
		server.Who = &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: node}, Display: node}
		server.Network = &fhirNetwork{Address: node, Type: "1"} // machine name
	}
	if hasUser {
		user := fhirAgent{
			Type:         &fhirConcept{Coding: []fhirCoding{{System: fhirParticipation, Code: "IRCP", Display: "information recipient"}}},
			Who:          &fhirReference{Identifier: &fhirIdentifier{Value: required(r.Principal.Sub)}},
			Requestor:    true,
			PurposeOfUse: purpose,
		}
		if ownAct(r) && rd >= rendererF35d06f { // custos itself, not a person who received information
			user.Type.Coding[0], user.Who.Type = agentApplication, "Device"
		}
		if rd >= rendererCurrent { // what agent-name searches: BALP's agent[user].name, "here is searchable"
			user.Name = user.Who.Identifier.Value
		}
		for _, role := range r.Principal.Roles {
			if t := str(role); t != "" {
				user.Role = append(user.Role, fhirConcept{Text: t})
			}
		}
		ev.Agent = append(ev.Agent, user)
	}
	ev.Agent = append(ev.Agent, client, server)

	// Entities.
	if kind == kindOther && rd >= renderer384f6a1 && slices.Contains(auditLogUses, r.Action) {
		ev.Entity = append(ev.Entity, auditLogEntity(r.Node))
	}
	for _, p := range patients {
		if p = str(p); p == "" {
			continue
		}
		ev.Entity = append(ev.Entity, fhirEntity{
			What: &fhirReference{Reference: pick(rd >= rendererCurrent && isFHIRID(p), "Patient/"+p, ""), Type: "Patient", Identifier: &fhirIdentifier{System: pick(rd >= rendererAd50907, patientSystem(p), custosPatientHash), Value: p}},
			Type: &fhirCoding{System: fhirEntityType, Code: "1", Display: "Person"},
			Role: &fhirCoding{System: fhirObjectRole, Code: "1", Display: "Patient"},
		})
	}
	var resultURIs []string // query results, named in the extension
	switch kind {
	case kindQuery:
		ev.Entity = append(ev.Entity, fhirEntity{
			Type:        &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
			Role:        &fhirCoding{System: fhirObjectRole, Code: "24", Display: "Query"},
			Description: str(r.Action),
			Query:       base64.StdEncoding.EncodeToString([]byte(r.Action)),
		})
		resultURIs = urisOf(r.URIs, patients, r.Patients, rd)
	default:
		for _, u := range r.URIs {
			if u = str(u); u == "" {
				continue
			}
			ev.Entity = append(ev.Entity, fhirEntity{
				What: &fhirReference{Identifier: &fhirIdentifier{System: pick(isURI(u) || rd < rendererF35d06f, fhirURI, ""), Value: u}},
				Type: &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
				Role: &fhirCoding{System: fhirObjectRole, Code: "4", Display: "Domain Resource"},
			})
		}
	}
	if p := balpProfile(r, kind, patients, client, server); p != "" {
		ev.Meta = &fhirMeta{Profile: []string{p}}
	}

	ext := fhirExtension{URL: custosAuditRecordExt}
	add := func(name, v string) {
		if v = str(v); v != "" {
			ext.Extension = append(ext.Extension, fhirExtension{URL: name, ValueString: v})
		}
	}
	add("seq", strconv.FormatUint(r.Seq, 10))
	add("hash", recordHash(r))
	add("prev_hash", r.PrevHash)
	add("action", r.Action)
	add("decision_id", r.DecisionID)
	add("policy_revision", r.PolicyRevision)
	add("session", r.Session)
	add("source", r.Source)
	for _, u := range resultURIs {
		add("uri", u)
	}
	for _, d := range r.Digests {
		add("digest", d)
	}
	for _, o := range r.Obligations {
		add("obligation", o)
	}
	for _, k := range r.Keys {
		add("key", k)
	}
	if agg, ok := aggregateOf(r); ok && rd >= rendererAd50907 {
		ev.Period = &fhirPeriod{Start: agg.start.Format(time.RFC3339), End: agg.end.Format(time.RFC3339)}
		add("count", strconv.FormatInt(agg.count, 10))
	}
	if r.Dev {
		add("dev", "true")
	}
	ev.Extension = []fhirExtension{ext}
	return ev
}

// balpProfile returns the BALP profile the event conforms to, or "" when
// it follows the pattern without meeting a profile: a failure (the
// profiles fix outcome 0), an action BALP has no pattern for, or a record
// lacking what the profile requires (client identity, client and server
// network addresses; a Read needs its data entity).
func balpProfile(r audit.Record, kind balpKind, patients []string, client, server fhirAgent) string {
	if kind == kindOther || r.Outcome != audit.OutcomeAllow ||
		client.Who == nil || client.Network == nil || server.Who == nil || server.Network == nil {
		return ""
	}
	switch kind {
	case kindRead:
		if len(r.URIs) != 1 || r.URIs[0] == "" {
			return ""
		}
		return pick(len(patients) == 1, balpPatientRead, balpRead)
	default:
		return pick(len(patients) == 1, balpPatientQuery, balpQuery)
	}
}

// clientNetwork is the client agent's network address, when the record
// knows it: an IP address (network-type 2) from an "ip:port" or "ip"
// source; for "stdio" the node's name (type 1, machine name: a stdio
// client runs on the server's machine). Other sources ("btg",
// "unidentified", the "oauth" of older logs, ...) name a transport or a
// component, not an address.
func clientNetwork(source, node string) *fhirNetwork {
	host := source
	if h, _, err := net.SplitHostPort(source); err == nil {
		host = h
	}
	if net.ParseIP(host) != nil {
		return &fhirNetwork{Address: host, Type: "2"}
	}
	if source == "stdio" && node != "" {
		return &fhirNetwork{Address: node, Type: "1"}
	}
	return nil
}

// patientSystem is the identifier system of a record's patient p:
// custosPatientHash for a keyed hash (audit.PseudonymPrefix and 32
// lowercase hex digits), none for anything else. Records written before
// patient ids were keyed-hashed (v1 records and the first v2 ones) hold the
// id itself; the event does not vouch for it as a pseudonym.
func patientSystem(p string) string {
	h, ok := strings.CutPrefix(p, audit.PseudonymPrefix)
	if !ok || len(h) != 32 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	return custosPatientHash
}

// isURI reports whether s is a URI, so that an identifier may name it
// under the system urn:ietf:rfc:3986: RFC 3986's absolute form, a scheme
// (a letter, then letters, digits, "+", "-", ".") and ":", then only the
// characters a URI may hold, each "%" followed by two hex digits. The
// server records a URI that does not parse as "invalid"
// (server/record.go), which is not one; nor is a URI template. It is pure.
func isURI(s string) bool {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || !isAlpha(scheme[0]) ||
		strings.Trim(scheme, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.") != "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case isAlpha(c) || '0' <= c && c <= '9' || strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(rest) && isHex(rest[i+1]) && isHex(rest[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

// searchable: since rendererCurrent (h-auditfhir), an event carries what
// R4's AuditEvent search parameters index for the searches an auditor
// makes (hl7.org/fhir/R4/auditevent.html#search): patient reads
// entity.what.where(resolve() is Patient), which only a literal reference
// satisfies, and agent-name reads agent.name (BALP's agent[user].name,
// "here is searchable"). docs/audit-format.md, "Searching the export in a
// FHIR server"; e2e TestAuditEventsSearchedInAFHIRServer runs them in
// Medplum's FHIR server.

// isFHIRID reports whether s is a FHIR R4 id ([A-Za-z0-9\-\.]{1,64}), so
// that "Patient/"+s is a literal reference a FHIR server indexes for the
// patient search parameter (searchable). A keyed hash (hk1- and 32 hex
// digits) is one. It is pure.
func isFHIRID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlpha(c) && !('0' <= c && c <= '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// deviceRef is the source observer: the custos node, made a FHIR string
// by str (fhirText).
func deviceRef(node string, str func(string) string) fhirReference {
	if node = str(node); node == "" {
		return fhirReference{Type: "Device", Display: "custos"}
	}
	return fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: node}, Display: node}
}

// urisOf returns the URIs of the query event of patients, by renderer rd:
// those naming one of patients (every occurrence of a patient id in a URI
// is its keyed hash, as in the record's patients), or all of them when
// patients is empty; since renderer0a0ff79, also each URI naming none of
// all, the record's patients: a tenant's reference data, or, in a record
// written before 2026-12-06, a URI whose patient segment the server
// recorded as the hash of the segment itself (server.patientOf then: a
// FHIR compartment without a Patient resource in the catalog), which no
// event's patient names. Since renderer311e1f4, a
// record of several patients puts such a URI that lies in a patient
// compartment (a stray, strayURIs) in an event of its own without a
// patient instead (patients empty, and all has several), as it is some
// patient's and the record does not say whose. Every URI of the record is
// then in some event, and an event of a patient never names a URI of
// another patient.
func urisOf(uris, patients, all []string, rd renderer) []string {
	if len(patients) == 0 {
		if rd >= renderer311e1f4 && len(all) > 1 {
			return strayURIs(uris, all)
		}
		return uris
	}
	var out []string
	for _, u := range uris {
		switch {
		case namesOneOf(u, patients):
		case rd < renderer0a0ff79 || namesOneOf(u, all):
			continue
		case rd >= renderer311e1f4 && len(all) > 1 && inCompartment(u):
			continue // a stray: in the event without a patient
		}
		out = append(out, u)
	}
	return out
}

// strayURIs returns the URIs that lie in a patient compartment
// (inCompartment) but name none of patients.
func strayURIs(uris, patients []string) []string {
	var out []string
	for _, u := range uris {
		if inCompartment(u) && !namesOneOf(u, patients) {
			out = append(out, u)
		}
	}
	return out
}

// inCompartment reports whether uri lies in a patient's compartment
// ("/patients/{patient}/", docs/uris.md).
func inCompartment(uri string) bool { return strings.Contains(uri, "/patients/") }

// namesOneOf reports whether uri holds one of patients.
func namesOneOf(uri string, patients []string) bool {
	return slices.ContainsFunc(patients, func(p string) bool { return p != "" && strings.Contains(uri, p) })
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// FHIR's string rules, for the record's own text (reasons, principals,
// roles, client ids, node names, URIs) in an AuditEvent: a FHIR string
// matches [ \r\n\t\S]+ (the R4 JSON schema, where \s is JavaScript's
// Unicode whitespace), holds no control character and something that is
// not whitespace, and is at most 1 MiB (Medplum); a code matches
// [^\s]+( [^\s]+)*. A record may hold anything a principal or a policy
// error wrote, so the FHIR rendering is made to fit, and the exact value
// stays in the record (records.jsonl, the extension's hash).

// maxFHIRString is the longest string rendered, in bytes: FHIR's 1 MiB,
// less room for the truncation mark.
const maxFHIRString = 1<<20 - 64

// fhirString is s as a FHIR string: each control character but tab, CR
// and LF becomes U+FFFD, each other whitespace character (no-break space,
// ideographic space, line and paragraph separators, the byte order mark)
// a space; a string longer than maxFHIRString is cut at a character
// boundary and marked; a string that is then only whitespace is "" (the
// element is left out). It is pure.
func fhirString(s string) string {
	clean := true
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\r' && r != '\n' && (unicode.IsControl(r) || jsSpace(r) || r == utf8.RuneError) {
			clean = false
			break
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			switch {
			case r == ' ' || r == '\t' || r == '\r' || r == '\n':
				return r
			case unicode.IsControl(r):
				return unicode.ReplacementChar
			case jsSpace(r):
				return ' '
			}
			return r
		}, s)
	}
	if len(s) > maxFHIRString {
		cut := maxFHIRString
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + " [truncated]"
	}
	if strings.TrimFunc(s, unicode.IsSpace) == "" {
		return ""
	}
	return s
}

// fhirText returns the functions renderer rd makes record text with: a
// FHIR string, a FHIR code and a string that must have a value. Before
// 13710ad (2026-12-05 00:47) the text was rendered as the record holds it.
func fhirText(rd renderer) (str, code, required func(string) string) {
	if rd < rendererF2704f7 {
		same := func(s string) string { return s }
		return same, same, same
	}
	return fhirString, fhirCode, fhirRequired
}

// fhirRequired is fhirString for an element that must have a value: a
// string that is only whitespace becomes U+FFFD.
func fhirRequired(s string) string {
	if v := fhirString(s); v != "" {
		return v
	}
	return string(unicode.ReplacementChar)
}

// fhirCode is s as a FHIR code: fhirString, with its whitespace trimmed
// and each run of it made one space ("" when nothing is left).
func fhirCode(s string) string {
	return strings.Join(strings.Fields(fhirString(s)), " ")
}

// jsSpace reports whether JavaScript's \s matches r (ECMAScript
// WhiteSpace and LineTerminator: Unicode's space separators, the byte
// order mark, and the ASCII and Unicode line breaks).
func jsSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\ufeff' || unicode.Is(unicode.Zs, r) || r == '\u2028' || r == '\u2029'
}
