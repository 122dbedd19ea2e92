package fhirsync

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// capability is what a sync needs from the CapabilityStatement.
type capability struct {
	// exportPath is the kick-off path relative to the base ("$export",
	// "Group/ID/$export" or "Patient/$export"), "" when Bulk is not offered.
	exportPath string
	// types are the searchable resource types (REST fallback).
	types []string
	// serverTime is the server's clock when it answered (its Date header),
	// or, when the server sent none, the local clock less
	// noDateHeaderMargin.
	serverTime time.Time
}

// capabilityStatement is the part of a CapabilityStatement used.
type capabilityStatement struct {
	ResourceType string   `json:"resourceType"`
	Instantiates []string `json:"instantiates"`
	Rest         []struct {
		Mode     string `json:"mode"`
		Resource []struct {
			Type        string `json:"type"`
			Interaction []struct {
				Code string `json:"code"`
			} `json:"interaction"`
			Operation []capOperation `json:"operation"`
		} `json:"resource"`
		Operation []capOperation `json:"operation"`
	} `json:"rest"`
}

type capOperation struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
}

// isExport reports whether an operation is Bulk Data $export (by name or
// by one of the bulk-data OperationDefinitions).
func (o capOperation) isExport() bool {
	n := strings.TrimPrefix(o.Name, "$")
	return n == "export" || strings.Contains(o.Definition, "bulkdata/OperationDefinition/")
}

// readCapability fetches [base]/metadata.
func (c *client) readCapability(ctx context.Context, group string) (capability, error) {
	u, _ := c.resolve("metadata")
	// Read before authenticating: the CapabilityStatement is public.
	resp, err := c.get(ctx, u, "application/fhir+json", nil)
	if err != nil {
		return capability{}, fmt.Errorf("capability statement: %w", err)
	}
	defer resp.Body.Close()
	var cs capabilityStatement
	if err := decodeJSON(resp, jsonTypes, &cs); err != nil {
		return capability{}, err
	}
	if cs.ResourceType != "CapabilityStatement" || len(cs.Rest) == 0 {
		return capability{}, fmt.Errorf("%w: GET %s: not a CapabilityStatement with a rest part", ErrServer, where(u))
	}
	cp := capability{}
	if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		cp.serverTime = c.notAhead(t, "Date header")
	} else {
		// The next REST increment starts here: a local clock ahead of
		// the server's would skip what changed in between, for good.
		// Fetched twice, an unchanged resource makes no new version.
		cp.serverTime = c.o.Now().Add(-noDateHeaderMargin)
		c.o.Logger.Warn("fhirsync: the server sent no Date header; the next increment starts from the local clock, less a margin for clock skew",
			"margin", noDateHeaderMargin.String())
	}
	cp.exportPath, cp.types = chooseExport(cs, group)
	return cp, nil
}

// noDateHeaderMargin is how far before the local clock a REST increment
// starts when the server gives no clock of its own, and how far ahead of
// the local clock the server's may be (notAhead).
const noDateHeaderMargin = 5 * time.Minute

// notAhead is t, the server's time where the next increment starts (a Date
// header, an export's transactionTime), unless it is more than
// noDateHeaderMargin ahead of the local clock (a proxy's clock, a wrong
// server clock: a Date header is any server's word): then every later
// increment would ask for changes since an instant in the future, and
// nothing changed on the server would be fetched until a full sync. Such a
// time is taken as no clock, the local clock less the margin (with a
// warning); starting earlier only fetches again what did not change.
func (c *client) notAhead(t time.Time, what string) time.Time {
	now := c.o.Now()
	if !t.After(now.Add(noDateHeaderMargin)) {
		return t
	}
	c.o.Logger.Warn("fhirsync: the server's "+what+" is ahead of the local clock by more than the margin for clock skew; the next increment starts from the local clock, less the margin",
		"ahead", t.Sub(now).Round(time.Second).String(), "margin", noDateHeaderMargin.String())
	return now.Add(-noDateHeaderMargin)
}

// chooseExport picks the $export kick-off path the CapabilityStatement
// offers — Group/<group>/$export when a group is asked for and Group
// export is offered, else system $export, else Patient/$export, else ""
// — and lists the types it can search.
func chooseExport(cs capabilityStatement, group string) (exportPath string, types []string) {
	var system, patient, groupOK bool
	for _, r := range cs.Rest {
		if r.Mode != "" && r.Mode != "server" {
			continue
		}
		for _, op := range r.Operation {
			system = system || op.isExport()
		}
		for _, res := range r.Resource {
			for _, op := range res.Operation {
				if op.isExport() {
					switch res.Type {
					case "Group":
						groupOK = true
					case "Patient":
						patient = true
					}
				}
			}
			for _, in := range res.Interaction {
				if in.Code == "search-type" && validType(res.Type) {
					types = append(types, res.Type)
					break
				}
			}
		}
	}
	switch {
	case group != "" && groupOK:
		exportPath = "Group/" + group + "/$export"
	case system:
		exportPath = "$export"
	case patient:
		exportPath = "Patient/$export"
	}
	return exportPath, types
}
