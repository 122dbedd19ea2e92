package fhirsync

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/custos-mcp/custos/internal/durable"
)

// State is what a sync remembers of one FHIR base between runs, in
// StateDir/sync-<sha256(base)[:16]>.json. It never holds a token.
type State struct {
	Base string `json:"base"`
	// Mode is the mode of the last sync: "bulk" or "rest".
	Mode string `json:"mode"`
	// Since is where the next incremental sync starts: the Bulk export's
	// transactionTime, or the server's clock when the REST sync started.
	Since time.Time `json:"since"`
	// Types are the resource types that sync fetched (Options.Types);
	// empty means every type. A later sync asking for a type outside
	// them fetches in full.
	Types []string `json:"types,omitempty"`
	// Searched are the types the last REST sync searched (Types, or the
	// CapabilityStatement's searchable types when Types is empty). A type
	// the server lists later holds resources updated before Since, so a
	// REST increment searches it in full; after a Bulk sync (whose export
	// may have been Patient- or Group-level) or with a state written
	// before this field, a REST increment searches every type in full
	// once (nothing is retired; an unchanged resource makes no version).
	Searched []string `json:"searched,omitempty"`
	// LastSync is when the last successful sync ended (local clock).
	LastSync time.Time `json:"last_sync"`
	// LastFull is when the last full sync ended.
	LastFull time.Time `json:"last_full"`
	// Resources and Deleted count what the last sync imported.
	Resources int `json:"resources"`
	Deleted   int `json:"deleted"`
}

// baseID is a short id of a normalized base: hex(SHA-256(base)[:8]).
func baseID(base string) string {
	h := sha256.Sum256([]byte(base))
	return hex.EncodeToString(h[:8])
}

// statePath is the state file of base in dir.
func statePath(dir, base string) string {
	return filepath.Join(dir, "sync-"+baseID(base)+".json")
}

// SourceLabel is the catalog source label of the resources synced from
// base: "fhir-sync:" + hex(SHA-256(normalized base)[:8]), within the
// catalog's label alphabet [a-z0-9:._-], the same for every spelling of
// the base ParseBase normalizes, and the same id as the state file's
// name. A full sync retires only resources of its own label.
func SourceLabel(base string) string {
	if u, err := ParseBase(base); err == nil {
		base = u.String()
	}
	return "fhir-sync:" + baseID(base)
}

// ReadState reads the state of base; a missing file is the zero State
// (the next sync is full).
func ReadState(dir, base string) (State, error) {
	u, err := ParseBase(base)
	if err != nil {
		return State{}, err
	}
	p := statePath(dir, u.String())
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	var tmp State
	if err := json.Unmarshal(b, &tmp); err != nil || tmp.Base != u.String() {
		return State{}, fmt.Errorf("%w: %s is not the sync state of %s; remove it to sync in full", ErrBadConfig, p, u.Redacted())
	}
	return tmp, nil
}

// writeState writes s atomically: a temporary file, fsync, rename, fsync of
// the directory. A crash leaves the old state or the new one.
func writeState(dir string, s State) error {
	p := statePath(dir, s.Base)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(p, append(b, '\n'), 0o600)
}
