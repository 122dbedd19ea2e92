package fhirin

import (
	"bytes"
	"encoding/json"
)

// Outcome reads raw as a FHIR OperationOutcome: isOO reports whether it is
// one, failed whether an issue has severity error or fatal, and code is
// that issue's code when it is one of the IssueType value set
// (issueTypes), so that it can be named in a message; its diagnostics and
// details are the server's free text and are never read. Any code of the
// form of one (lowercase letters and hyphens) was named, so a name written
// as a code ("jane-doe") reached a sync's error and its sync/end audit
// record (fhirsync TestRemoteTextNeverInMessages). It is pure.
func Outcome(raw []byte) (isOO bool, code string, failed bool) {
	var res struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Severity string `json:"severity"`
			Code     string `json:"code"`
		} `json:"issue"`
	}
	// Most values are not one: skip their second parse.
	if !bytes.Contains(raw, []byte(`"OperationOutcome"`)) || json.Unmarshal(raw, &res) != nil || res.ResourceType != "OperationOutcome" {
		return false, "", false
	}
	for _, is := range res.Issue {
		if is.Severity == "error" || is.Severity == "fatal" {
			if !issueTypes[is.Code] {
				return true, "", true
			}
			return true, is.Code, true
		}
	}
	return true, "", false
}

// issueTypes are the codes of FHIR R4's IssueType value set
// (http://hl7.org/fhir/ValueSet/issue-type, 31 codes): the only issue
// codes Outcome names.
var issueTypes = map[string]bool{
	"invalid": true, "structure": true, "required": true, "value": true, "invariant": true,
	"security": true, "login": true, "unknown": true, "expired": true, "forbidden": true, "suppressed": true,
	"processing": true, "not-supported": true, "duplicate": true, "multiple-matches": true, "not-found": true,
	"deleted": true, "too-long": true, "code-invalid": true, "extension": true, "too-costly": true,
	"business-rule": true, "conflict": true, "transient": true, "lock-error": true, "no-store": true,
	"exception": true, "timeout": true, "incomplete": true, "throttled": true, "informational": true,
}
