package bundle

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

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
	FormatFHIR Format = "fhir" // auditevent.ndjson: one FHIR R4 AuditEvent (IHE BALP) per line
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
	switch f {
	case FormatCSV:
		return csvLine(CSVRow(r))
	case FormatFHIR:
		ev, err := FHIRAuditEvent(r)
		return append(ev, '\n'), err
	case FormatOCSF:
		ev, err := OCSFAPIActivity(r)
		return append(ev, '\n'), err
	}
	return nil, fmt.Errorf("bundle: unknown format %q", f)
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
// cells a spreadsheet would evaluate (starting with = + - @ tab CR) prefixed
// with a single quote.
func CSVRow(r audit.Record) []string {
	j := func(s []string) string { return strings.Join(s, ";") }
	row := []string{
		strconv.Itoa(r.V), strconv.FormatUint(r.Seq, 10), r.EventID, r.Time.UTC().Format(audit.TimeLayout), r.Node,
		r.Action, r.Outcome, r.Reason,
		r.Principal.Sub, j(r.Principal.Roles), r.Principal.ClientID, r.PurposeOfUse, r.Session, r.Source,
		j(r.URIs), j(r.Patients), j(r.Digests), r.DecisionID, r.PolicyRevision,
		j(r.Obligations), strconv.FormatBool(r.Dev), j(r.Keys), r.PrevHash, recordHash(r),
	}
	for i, cell := range row {
		if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
			row[i] = "'" + cell
		}
	}
	return row
}

// FHIR code systems and profiles used by FHIRAuditEvent.
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
	balpPatientRead      = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientRead"
	balpRead             = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read"
	balpPatientQuery     = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientQuery"
	balpQuery            = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query"
	custosAuditRecordExt = "https://github.com/custos-mcp/custos/fhir/StructureDefinition/audit-record"
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
	Type       string          `json:"type,omitempty"`
	Identifier *fhirIdentifier `json:"identifier,omitempty"`
	Display    string          `json:"display,omitempty"`
}

type fhirNetwork struct {
	Address string `json:"address"`
	Type    string `json:"type,omitempty"`
}

type fhirAgent struct {
	Type      *fhirConcept   `json:"type,omitempty"`
	Role      []fhirConcept  `json:"role,omitempty"`
	Who       *fhirReference `json:"who,omitempty"`
	Requestor bool           `json:"requestor"`
	Network   *fhirNetwork   `json:"network,omitempty"`
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
	Description string         `json:"description,omitempty"`
}

type fhirExtension struct {
	URL         string          `json:"url"`
	ValueString string          `json:"valueString,omitempty"`
	Extension   []fhirExtension `json:"extension,omitempty"`
}

type fhirMeta struct {
	Profile []string `json:"profile"`
}

type fhirAuditEvent struct {
	ResourceType   string          `json:"resourceType"`
	ID             string          `json:"id"`
	Meta           *fhirMeta       `json:"meta,omitempty"`
	Extension      []fhirExtension `json:"extension"`
	Type           fhirCoding      `json:"type"`
	Subtype        []fhirCoding    `json:"subtype,omitempty"`
	Action         string          `json:"action"`
	Recorded       string          `json:"recorded"`
	Outcome        string          `json:"outcome"`
	OutcomeDesc    string          `json:"outcomeDesc,omitempty"`
	PurposeOfEvent []fhirConcept   `json:"purposeOfEvent,omitempty"`
	Agent          []fhirAgent     `json:"agent"`
	Source         fhirSource      `json:"source"`
	Entity         []fhirEntity    `json:"entity,omitempty"`
}

// FHIRAuditEvent renders r as a FHIR R4 AuditEvent following the IHE Basic
// Audit Log Patterns (BALP):
//
//   - resources/read: PatientRead (or Read when no patient is concerned):
//     type audit-event-type#rest, subtype restful-interaction#read, action R;
//   - resources/list and resources/templates/list: PatientQuery (or Query):
//     type rest, subtype restful-interaction#search, action E;
//   - any other action: type DCM#110100 (Application Activity), action E.
//
// outcome is 0 (success) for allow, 4 (minor failure) for deny, 8 (serious
// failure) for error, with the reason in outcomeDesc. Agents: the user
// (type v3-ParticipationType#IRCP, who.identifier = principal sub, role =
// principal roles, requestor), the client application (DCM#110153 Source
// Role ID, who.identifier = client_id, network = the record's source) and
// the server (DCM#110152 Destination Role ID, the node). Entities: each
// patient (audit-entity-type#1 Person, object-role#1 Patient,
// what.identifier = the patient id or pseudonym as recorded) and each
// resource URI (#2 System Object, object-role#4 Domain Resource, or #24
// Query for list actions). purposeOfEvent is the HL7 v3 ActReason code,
// recorded the record time, source.observer the node. The event id is the
// record's event_id; the extension custosAuditRecordExt carries seq, hash,
// prev_hash, action, decision_id, policy_revision, session, the digests and
// obligations, so that every event traces back to its signed record.
func FHIRAuditEvent(r audit.Record) ([]byte, error) {
	ev := fhirAuditEvent{
		ResourceType: "AuditEvent",
		ID:           r.EventID,
		Recorded:     r.Time.UTC().Format(audit.TimeLayout),
		OutcomeDesc:  r.Reason,
		Source: fhirSource{
			Site:     r.Node,
			Observer: fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: r.Node}, Display: r.Node},
			Type:     []fhirCoding{{System: fhirSourceType, Code: "4", Display: "Application Server"}},
		},
	}
	patientScoped := len(r.Patients) > 0
	query := false
	switch r.Action {
	case audit.ActionResourcesRead:
		ev.Type = fhirCoding{System: fhirAuditEventType, Code: "rest", Display: "Restful Operation"}
		ev.Subtype = []fhirCoding{{System: fhirRestful, Code: "read", Display: "read"}}
		ev.Action = "R"
		ev.Meta = &fhirMeta{Profile: []string{pick(patientScoped, balpPatientRead, balpRead)}}
	case audit.ActionResourcesList, audit.ActionResourcesTemplatesList:
		ev.Type = fhirCoding{System: fhirAuditEventType, Code: "rest", Display: "Restful Operation"}
		ev.Subtype = []fhirCoding{{System: fhirRestful, Code: "search", Display: "search"}}
		ev.Action = "E"
		ev.Meta = &fhirMeta{Profile: []string{pick(patientScoped, balpPatientQuery, balpQuery)}}
		query = true
	default:
		ev.Type = fhirCoding{System: fhirDICOM, Code: "110100", Display: "Application Activity"}
		ev.Action = "E"
	}
	switch r.Outcome {
	case audit.OutcomeAllow:
		ev.Outcome = "0"
	case audit.OutcomeDeny:
		ev.Outcome = "4"
	default:
		ev.Outcome = "8"
	}
	if r.PurposeOfUse != "" {
		ev.PurposeOfEvent = []fhirConcept{{Coding: []fhirCoding{{System: fhirActReason, Code: r.PurposeOfUse}}}}
	}

	user := fhirAgent{
		Type:      &fhirConcept{Coding: []fhirCoding{{System: fhirParticipation, Code: "IRCP", Display: "information recipient"}}},
		Who:       &fhirReference{Identifier: &fhirIdentifier{Value: r.Principal.Sub}},
		Requestor: true,
	}
	for _, role := range r.Principal.Roles {
		user.Role = append(user.Role, fhirConcept{Text: role})
	}
	client := fhirAgent{
		Type: &fhirConcept{Coding: []fhirCoding{{System: fhirDICOM, Code: "110153", Display: "Source Role ID"}}},
		Who:  &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: r.Principal.ClientID}},
	}
	if r.Source != "" {
		client.Network = &fhirNetwork{Address: r.Source, Type: networkType(r.Source)}
	}
	server := fhirAgent{
		Type: &fhirConcept{Coding: []fhirCoding{{System: fhirDICOM, Code: "110152", Display: "Destination Role ID"}}},
		Who:  &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: r.Node}, Display: r.Node},
	}
	ev.Agent = []fhirAgent{user, client, server}

	for _, p := range r.Patients {
		ev.Entity = append(ev.Entity, fhirEntity{
			What: &fhirReference{Type: "Patient", Identifier: &fhirIdentifier{Value: p}},
			Type: &fhirCoding{System: fhirEntityType, Code: "1", Display: "Person"},
			Role: &fhirCoding{System: fhirObjectRole, Code: "1", Display: "Patient"},
		})
	}
	for _, u := range r.URIs {
		e := fhirEntity{
			What: &fhirReference{Identifier: &fhirIdentifier{System: "urn:ietf:rfc:3986", Value: u}},
			Type: &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
			Role: &fhirCoding{System: fhirObjectRole, Code: "4", Display: "Domain Resource"},
		}
		ev.Entity = append(ev.Entity, e)
	}
	if query {
		ev.Entity = append(ev.Entity, fhirEntity{
			Type:        &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
			Role:        &fhirCoding{System: fhirObjectRole, Code: "24", Display: "Query"},
			Description: r.Action,
		})
	}

	ext := fhirExtension{URL: custosAuditRecordExt}
	add := func(name, v string) {
		if v != "" {
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
	for _, d := range r.Digests {
		add("digest", d)
	}
	for _, o := range r.Obligations {
		add("obligation", o)
	}
	for _, k := range r.Keys {
		add("key", k)
	}
	if r.Dev {
		add("dev", "true")
	}
	ev.Extension = []fhirExtension{ext}
	return marshalLine(ev)
}

// networkType is the FHIR network-type code of an agent address: "2" (IP
// address) when the source is an IP or IP:port, otherwise none.
func networkType(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if net.ParseIP(host) != nil {
		return "2"
	}
	return ""
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// OCSF constants: class API Activity (6003) in category Application
// Activity (6).
const (
	ocsfVersion       = "1.3.0"
	ocsfClassUID      = 6003
	ocsfCategoryUID   = 6
	ocsfActivityRead  = 2
	ocsfActivityOther = 99
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
	UID    string      `json:"uid"`
	Groups []ocsfGroup `json:"groups,omitempty"`
}

type ocsfSession struct {
	UID string `json:"uid"`
}

type ocsfActor struct {
	User    ocsfUser     `json:"user"`
	AppName string       `json:"app_name,omitempty"`
	Session *ocsfSession `json:"session,omitempty"`
}

type ocsfService struct {
	Name string `json:"name"`
}

type ocsfAPI struct {
	Operation string      `json:"operation"`
	Service   ocsfService `json:"service"`
}

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
	Time         int64          `json:"time"`
	SeverityID   int            `json:"severity_id"`
	Severity     string         `json:"severity"`
	StatusID     int            `json:"status_id"`
	Status       string         `json:"status"`
	StatusCode   string         `json:"status_code"`
	StatusDetail string         `json:"status_detail,omitempty"`
	Metadata     ocsfMetadata   `json:"metadata"`
	Actor        ocsfActor      `json:"actor"`
	API          ocsfAPI        `json:"api"`
	SrcEndpoint  ocsfEndpoint   `json:"src_endpoint"`
	Resources    []ocsfResource `json:"resources,omitempty"`
	Unmapped     ocsfUnmapped   `json:"unmapped"`
}

// OCSFAPIActivity renders r as an OCSF API Activity event (class_uid 6003,
// category_uid 6, OCSF 1.3.0): activity_id 2 (Read) for resources/read,
// resources/list and resources/templates/list, 99 (Other, activity_name =
// the action) otherwise; type_uid = 600300 + activity_id; time in Unix
// milliseconds; status_id 1 (Success) for allow and 2 (Failure) for deny or
// error, with status_code the outcome and status_detail the reason;
// severity_id 1 (Informational) for allow, 2 (Low) for deny, 3 (Medium) for
// error. metadata.uid is the event_id and metadata.sequence the seq;
// actor.user.uid the principal sub (roles as groups), actor.app_name the
// client_id, api.operation the action, src_endpoint the record's source,
// resources the URIs and patients; the rest (hash, prev_hash, purpose of
// use, policy decision, digests, obligations, keys) is in unmapped.
func OCSFAPIActivity(r audit.Record) ([]byte, error) {
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
		Actor: ocsfActor{
			User:    ocsfUser{UID: r.Principal.Sub},
			AppName: r.Principal.ClientID,
		},
		API: ocsfAPI{Operation: r.Action, Service: ocsfService{Name: "mcp"}},
		Unmapped: ocsfUnmapped{
			V: r.V, Node: r.Node, Hash: recordHash(r), PrevHash: r.PrevHash,
			PurposeOfUse: r.PurposeOfUse, DecisionID: r.DecisionID, PolicyRevision: r.PolicyRevision,
			Digests: nonNil(r.Digests), Obligations: nonNil(r.Obligations), Dev: r.Dev, Keys: nonNil(r.Keys),
		},
	}
	switch r.Action {
	case audit.ActionResourcesRead, audit.ActionResourcesList, audit.ActionResourcesTemplatesList:
		ev.ActivityID, ev.ActivityName = ocsfActivityRead, "Read"
	default:
		ev.ActivityID, ev.ActivityName = ocsfActivityOther, r.Action
	}
	ev.TypeUID = ocsfClassUID*100 + ev.ActivityID
	switch r.Outcome {
	case audit.OutcomeAllow:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 1, "Success", 1, "Informational"
	case audit.OutcomeDeny:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 2, "Failure", 2, "Low"
	default:
		ev.StatusID, ev.Status, ev.SeverityID, ev.Severity = 2, "Failure", 3, "Medium"
	}
	for _, g := range r.Principal.Roles {
		ev.Actor.User.Groups = append(ev.Actor.User.Groups, ocsfGroup{Name: g})
	}
	if r.Session != "" {
		ev.Actor.Session = &ocsfSession{UID: r.Session}
	}
	ev.SrcEndpoint = ocsfEndpointOf(r.Source)
	for _, u := range r.URIs {
		ev.Resources = append(ev.Resources, ocsfResource{UID: u, Type: "mcp_resource"})
	}
	for _, p := range r.Patients {
		ev.Resources = append(ev.Resources, ocsfResource{UID: p, Type: "patient"})
	}
	return marshalLine(ev)
}

func ocsfEndpointOf(source string) ocsfEndpoint {
	host, port, err := net.SplitHostPort(source)
	if err == nil && net.ParseIP(host) != nil {
		p, _ := strconv.Atoi(port)
		return ocsfEndpoint{IP: host, Port: p}
	}
	if net.ParseIP(source) != nil {
		return ocsfEndpoint{IP: source}
	}
	return ocsfEndpoint{Name: source}
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
