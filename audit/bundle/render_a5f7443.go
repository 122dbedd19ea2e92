package bundle

import (
	"net"
	"strconv"

	"github.com/custos-mcp/custos/audit"
)

// The FHIR and OCSF renderings of rendererA5f7443: the bundles custos wrote
// from a5f7443 (2026-11-21 23:05, when 'audit export --out' came) to
// e4e2278 (2026-11-25 00:46), before the derived check. This is that
// version's code (audit/bundle/formats.go at e4e2278), frozen, its names
// suffixed A5f7443: one AuditEvent per record, every record text as
// stored, no BALP agent or entity rules of 471441e, OCSF activity 2 (Read)
// for the MCP requests and 99 (Other) for every other action.
// testdata/golden/renderers/1c9bd06 holds what that build wrote
// (TestEarlierRenderersAreThoseBuilds). Do not change it: a change makes
// the verifier call those bundles' lines changed after export.

type fhirNetworkA5f7443 struct {
	Address string `json:"address"`
	Type    string `json:"type,omitempty"`
}

type fhirAgentA5f7443 struct {
	Type      *fhirConcept        `json:"type,omitempty"`
	Role      []fhirConcept       `json:"role,omitempty"`
	Who       *fhirReference      `json:"who,omitempty"`
	Requestor bool                `json:"requestor"`
	Network   *fhirNetworkA5f7443 `json:"network,omitempty"`
}

type fhirEntityA5f7443 struct {
	What        *fhirReference `json:"what,omitempty"`
	Type        *fhirCoding    `json:"type,omitempty"`
	Role        *fhirCoding    `json:"role,omitempty"`
	Description string         `json:"description,omitempty"`
}

type fhirAuditEventA5f7443 struct {
	ResourceType   string              `json:"resourceType"`
	ID             string              `json:"id"`
	Meta           *fhirMeta           `json:"meta,omitempty"`
	Extension      []fhirExtension     `json:"extension"`
	Type           fhirCoding          `json:"type"`
	Subtype        []fhirCoding        `json:"subtype,omitempty"`
	Action         string              `json:"action"`
	Recorded       string              `json:"recorded"`
	Outcome        string              `json:"outcome"`
	OutcomeDesc    string              `json:"outcomeDesc,omitempty"`
	PurposeOfEvent []fhirConcept       `json:"purposeOfEvent,omitempty"`
	Agent          []fhirAgentA5f7443  `json:"agent"`
	Source         fhirSource          `json:"source"`
	Entity         []fhirEntityA5f7443 `json:"entity,omitempty"`
}

// fhirAuditEventsA5f7443 is FHIRAuditEvent of e4e2278: one AuditEvent for r,
// without its trailing newline.
func fhirAuditEventsA5f7443(r audit.Record) ([]byte, error) {
	ev := fhirAuditEventA5f7443{
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

	user := fhirAgentA5f7443{
		Type:      &fhirConcept{Coding: []fhirCoding{{System: fhirParticipation, Code: "IRCP", Display: "information recipient"}}},
		Who:       &fhirReference{Identifier: &fhirIdentifier{Value: r.Principal.Sub}},
		Requestor: true,
	}
	for _, role := range r.Principal.Roles {
		user.Role = append(user.Role, fhirConcept{Text: role})
	}
	client := fhirAgentA5f7443{
		Type: &fhirConcept{Coding: []fhirCoding{{System: fhirDICOM, Code: "110153", Display: "Source Role ID"}}},
		Who:  &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: r.Principal.ClientID}},
	}
	if r.Source != "" {
		client.Network = &fhirNetworkA5f7443{Address: r.Source, Type: networkTypeA5f7443(r.Source)}
	}
	server := fhirAgentA5f7443{
		Type: &fhirConcept{Coding: []fhirCoding{{System: fhirDICOM, Code: "110152", Display: "Destination Role ID"}}},
		Who:  &fhirReference{Type: "Device", Identifier: &fhirIdentifier{Value: r.Node}, Display: r.Node},
	}
	ev.Agent = []fhirAgentA5f7443{user, client, server}

	for _, p := range r.Patients {
		ev.Entity = append(ev.Entity, fhirEntityA5f7443{
			What: &fhirReference{Type: "Patient", Identifier: &fhirIdentifier{Value: p}},
			Type: &fhirCoding{System: fhirEntityType, Code: "1", Display: "Person"},
			Role: &fhirCoding{System: fhirObjectRole, Code: "1", Display: "Patient"},
		})
	}
	for _, u := range r.URIs {
		e := fhirEntityA5f7443{
			What: &fhirReference{Identifier: &fhirIdentifier{System: "urn:ietf:rfc:3986", Value: u}},
			Type: &fhirCoding{System: fhirEntityType, Code: "2", Display: "System Object"},
			Role: &fhirCoding{System: fhirObjectRole, Code: "4", Display: "Domain Resource"},
		}
		ev.Entity = append(ev.Entity, e)
	}
	if query {
		ev.Entity = append(ev.Entity, fhirEntityA5f7443{
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

// networkTypeA5f7443 is the FHIR network-type code of an agent address: "2" (IP
// address) when the source is an IP or IP:port, otherwise none.
func networkTypeA5f7443(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if net.ParseIP(host) != nil {
		return "2"
	}
	return ""
}

type ocsfUserA5f7443 struct {
	UID    string      `json:"uid"`
	Groups []ocsfGroup `json:"groups,omitempty"`
}

type ocsfActorA5f7443 struct {
	User    ocsfUserA5f7443 `json:"user"`
	AppName string          `json:"app_name,omitempty"`
	Session *ocsfSession    `json:"session,omitempty"`
}

type ocsfAPIA5f7443 struct {
	Operation string      `json:"operation"`
	Service   ocsfService `json:"service"`
}

type ocsfEventA5f7443 struct {
	ClassUID     int              `json:"class_uid"`
	ClassName    string           `json:"class_name"`
	CategoryUID  int              `json:"category_uid"`
	CategoryName string           `json:"category_name"`
	ActivityID   int              `json:"activity_id"`
	ActivityName string           `json:"activity_name"`
	TypeUID      int              `json:"type_uid"`
	Time         int64            `json:"time"`
	SeverityID   int              `json:"severity_id"`
	Severity     string           `json:"severity"`
	StatusID     int              `json:"status_id"`
	Status       string           `json:"status"`
	StatusCode   string           `json:"status_code"`
	StatusDetail string           `json:"status_detail,omitempty"`
	Metadata     ocsfMetadata     `json:"metadata"`
	Actor        ocsfActorA5f7443 `json:"actor"`
	API          ocsfAPIA5f7443   `json:"api"`
	SrcEndpoint  ocsfEndpoint     `json:"src_endpoint"`
	Resources    []ocsfResource   `json:"resources,omitempty"`
	Unmapped     ocsfUnmapped     `json:"unmapped"`
}

// ocsfAPIActivityA5f7443 is OCSFAPIActivity of e4e2278: r's OCSF API Activity
// event, without its trailing newline.
func ocsfAPIActivityA5f7443(r audit.Record) ([]byte, error) {
	ev := ocsfEventA5f7443{
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
		Actor: ocsfActorA5f7443{
			User:    ocsfUserA5f7443{UID: r.Principal.Sub},
			AppName: r.Principal.ClientID,
		},
		API: ocsfAPIA5f7443{Operation: r.Action, Service: ocsfService{Name: "mcp"}},
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
	ev.SrcEndpoint = ocsfEndpointOfA5f7443(r.Source)
	for _, u := range r.URIs {
		ev.Resources = append(ev.Resources, ocsfResource{UID: u, Type: "mcp_resource"})
	}
	for _, p := range r.Patients {
		ev.Resources = append(ev.Resources, ocsfResource{UID: p, Type: "patient"})
	}
	return marshalLine(ev)
}

func ocsfEndpointOfA5f7443(source string) ocsfEndpoint {
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
