package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/secrets"
)

// Patient lookups (audit hash, audit report --patient and its 164.528
// accounting) search every version of the audit keyed-hash key ever used:
// a record names its patients under the version in force when it was
// written, so a lookup that skipped a version would silently miss records.

// acceptKeyGapFlag is the flag that lets a lookup go on without the key
// versions that cannot be read, stating the gap in its output.
const acceptKeyGapFlag = "accept-key-gap"

func registerAcceptKeyGap(f *pflag.FlagSet, accept *bool) {
	f.BoolVar(accept, acceptKeyGapFlag, false, "go on when an audit key version cannot be read (destroyed or deleted in Vault); "+
		"the output states that records keyed under it are missing")
}

// patientLookup returns value's lookup values under every audit key version
// ever used (secrets.AuditKeyHistory), the keys they were computed under,
// and which versions were searched. It fails closed when a version cannot
// be read, naming each and why, unless acceptGap: then the versions not
// searched are listed and the gap marked accepted.
func patientLookup(ctx context.Context, k auditorKeys, value string, acceptGap bool) ([]string, []secrets.Key, report.KeyVersions, error) {
	kv := report.KeyVersions{Searched: []string{}, NotSearched: []report.KeyProblem{}} // [] in JSON when empty
	h, err := k.AuditKeyHistory(ctx)
	if err != nil {
		return nil, nil, kv, err
	}
	keys := h.Keys()
	for _, key := range keys {
		kv.Searched = append(kv.Searched, key.ID)
	}
	var missing []string
	for _, v := range h.Unreadable() {
		kv.NotSearched = append(kv.NotSearched, report.KeyProblem{Key: v.ID, Problem: v.Problem})
		missing = append(missing, v.ID+" ("+v.Problem+")")
	}
	switch {
	case len(keys) == 0:
		return nil, nil, kv, fmt.Errorf("no version of the audit key can be read: %s", strings.Join(missing, "; "))
	case len(missing) > 0 && !acceptGap:
		return nil, nil, kv, fmt.Errorf("%d audit key version(s) cannot be read, so records keyed under them would be missed: %s. "+
			"Restore them in Vault, or pass --%s to search the %d other version(s) and have the output state the gap",
			len(missing), strings.Join(missing, "; "), acceptKeyGapFlag, len(keys))
	}
	kv.GapAccepted = len(missing) > 0
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = audit.Pseudonym(key.Bytes, value)
	}
	return out, keys, kv, nil
}
