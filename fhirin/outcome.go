package fhirin

import (
	"bytes"
	"encoding/json"
)

// Outcome reads raw as a FHIR OperationOutcome: isOO reports whether it is
// one, failed whether an issue has severity error or fatal, and code is
// that issue's code when it has the form of an issue-type code (lowercase
// letters and hyphens), so that it can be named in a message; its
// diagnostics and details are the server's free text and are never read.
// It is pure.
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
			if !issueCodeForm(is.Code) {
				return true, "", true
			}
			return true, is.Code, true
		}
	}
	return true, "", false
}

// issueCodeForm reports whether c looks like a FHIR code of issue-type
// (lowercase letters and hyphens).
func issueCodeForm(c string) bool {
	if c == "" || len(c) > 64 {
		return false
	}
	for _, r := range c {
		if (r < 'a' || r > 'z') && r != '-' {
			return false
		}
	}
	return true
}
