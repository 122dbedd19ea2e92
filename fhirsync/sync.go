package fhirsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/internal/owner"
	"github.com/custos-mcp/custos/internal/regularfile"
)

// Event is one audit record of a sync: Phase "start" before the first
// request to the server, "end" when the sync is over (Err nil: imported).
type Event struct {
	Phase  string // "start" | "end"
	Base   string // the FHIR base URL (never credentials: ParseBase refuses them)
	Tenant string
	Full   bool      // a full fetch (missing resources retired unless Types restricted it)
	Since  time.Time // zero for a full sync
	// The rest is set on "end".
	Mode      string // "bulk" | "rest" ("" if the sync failed before choosing)
	Resources int    // resources staged (and, with Err nil, imported)
	Deleted   int    // deletions that retired a resource (0 unless imported)
	// DeletesIgnored are the deletions the server listed of resources the
	// catalog did not hold (Imported.DeletesIgnored; 0 unless imported).
	DeletesIgnored int
	Types          map[string]int // resources per type
	Binaries       int            // Binaries fetched by their attachment url (in Resources and Types too)
	Skipped        Skipped        // entries left out on purpose (Result.Skipped)
	Requests       int            // HTTP requests sent, retries included
	Duration       time.Duration
	Err            error // nil: imported; else the cause (its message names paths only)
}

// Result is what a successful sync did.
type Result struct {
	Base      string    `json:"base"`
	Mode      string    `json:"mode"`
	Full      bool      `json:"full"`
	Since     time.Time `json:"since,omitzero"`
	Resources int       `json:"resources"`
	// Deleted are the deletions that retired a resource custos held;
	// DeletesIgnored those of resources it did not hold (never imported:
	// of a type not synced, created and deleted between two syncs; or
	// retired already), which changed nothing. Until 2026-12-06 Deleted
	// counted every deletion the server listed.
	Deleted        int            `json:"deleted"`
	DeletesIgnored int            `json:"deletes_ignored,omitempty"`
	Types          map[string]int `json:"types"`
	// Binaries are the Binaries the export or search did not hold that
	// staged attachments name by url, fetched one by one (GET
	// [base]/Binary/<id>); they count in Resources and Types too.
	Binaries int           `json:"binaries_fetched"`
	Requests int           `json:"requests"`
	Tokens   int           `json:"tokens"`
	Duration time.Duration `json:"duration_ns"`
	// Next is where the next incremental sync starts.
	Next time.Time `json:"next_since"`
	// Searched are the types a REST sync searched (State.Searched); New
	// are those of them an increment searched in full, because the
	// previous sync had not searched them (a type the server lists now, or
	// every type after a Bulk sync or a state without the list).
	Searched []string `json:"searched,omitempty"`
	New      []string `json:"new_types,omitempty"`
	// Skipped counts what the sync left out on purpose, as an import's
	// report does (app.FHIRReport): the search outcomes of the REST
	// pages (warnings, information; an error fails the sync), and the
	// entries the importer left out of the staged Bundles
	// (Imported.Skipped: read requests, search outcomes of a Bundle the
	// server holds as a resource), and the entries a REST page added
	// beside its matches (Skipped.Includes).
	Skipped Skipped `json:"skipped"`
}

// Skipped counts the entries a sync left out on purpose: the importer's
// kinds (fhirin.Skipped, its JSON fields inline) and the REST pages'
// included entries.
type Skipped struct {
	fhirin.Skipped
	// Includes are the entries of a REST search page with search.mode
	// "include": resources the server added beside the search's matches
	// (custos asks for no _include). They are not the searched type's
	// matches; a resource of a type the sync covers is staged from that
	// type's own search, one of a type it does not cover is not synced.
	// Counted in each search's first pass only.
	Includes int `json:"search_includes"`
}

// Syncer syncs one FHIR base. Its Run may be called repeatedly (a
// schedule); runs of the same base, in this or another process, exclude
// each other through a lock file beside the state file.
type Syncer struct {
	o Options
}

// New checks opts and returns a Syncer.
func New(opts Options) (*Syncer, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Syncer{o: opts}, nil
}

// Base is the normalized FHIR base URL.
func (s *Syncer) Base() string { return s.o.Base }

// Run does one sync (see the package documentation for the steps and
// invariants).
func (s *Syncer) Run(ctx context.Context) (Result, error) {
	o := s.o
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return Result{}, fmt.Errorf("%w: state directory: %v", ErrBadConfig, err)
	}
	unlock, err := lockBase(o.StateDir, o.Base)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	prev, err := ReadState(o.StateDir, o.Base)
	if err != nil {
		return Result{}, err
	}
	// An increment continues the previous sync only for the types that
	// sync covered: asking for a type it did not fetch is a full fetch.
	full := o.Full || prev.Since.IsZero() || !covers(prev.Types, o.Types)
	var since time.Time
	if !full {
		since = prev.Since
	}
	start := o.Now()
	if err := o.Recorder.RecordSync(ctx, Event{Phase: "start", Base: o.Base, Tenant: o.Tenant, Full: full, Since: since}); err != nil {
		return Result{}, fmt.Errorf("%w: %v (nothing was fetched)", ErrNotRecorded, err)
	}
	// What the previous sync searched type by type: only a REST sync's
	// list says (a Bulk export may have been Patient- or Group-level, and a
	// state written before the list was kept says nothing).
	var searched []string
	if prev.Mode == "rest" {
		searched = prev.Searched
	}
	res, c, err := s.run(ctx, full, since, searched)
	// What a server echoed of the sync's credentials leaves in no message,
	// and what else of its text the error holds leaves it scrubbed.
	err = quietErr(c.creds.redactErr(err))
	res.Duration = o.Now().Sub(start)
	end := Event{Phase: "end", Base: o.Base, Tenant: o.Tenant, Full: full, Since: since, Mode: res.Mode,
		Resources: res.Resources, Deleted: res.Deleted, DeletesIgnored: res.DeletesIgnored, Types: res.Types, Binaries: res.Binaries, Skipped: res.Skipped, Requests: int(c.requests.Load()), Duration: res.Duration, Err: err}
	res.Requests = int(c.requests.Load())
	if c.auth != nil {
		res.Tokens = c.auth.fetched
	}
	// The outcome record is written with a context that outlives a
	// cancelled sync: a cancelled sync is still recorded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := o.Recorder.RecordSync(rctx, end); rerr != nil && err == nil {
		// Imported but not recorded: the state is not advanced, so the
		// next sync fetches (and records) the same changes again.
		return res, fmt.Errorf("%w: the outcome of a sync that imported %d resources: %v (state not advanced)", ErrNotRecorded, res.Resources, rerr)
	}
	if err != nil {
		return res, err
	}
	st := State{Base: o.Base, Mode: res.Mode, Since: res.Next, Types: o.Types, Searched: res.Searched, LastSync: o.Now().UTC(), LastFull: prev.LastFull,
		Resources: res.Resources, Deleted: res.Deleted}
	if full && len(o.Types) == 0 {
		st.LastFull = st.LastSync
	}
	if err := writeState(o.StateDir, st); err != nil {
		return res, fmt.Errorf("imported, but writing the sync state failed (the next sync repeats this one): %w", err)
	}
	return res, nil
}

// run fetches, stages and imports; c is returned for its counters. In an
// increment (since set), a REST search of a type outside searched (the
// types the previous sync searched, if it was a REST sync that listed
// them) is a full search of that type.
func (s *Syncer) run(ctx context.Context, full bool, since time.Time, searched []string) (Result, *client, error) {
	o := &s.o
	base, _ := ParseBase(o.Base)
	c := &client{o: o, base: base, creds: &credentials{}}
	res := Result{Base: o.Base, Full: full, Since: since}
	o.Progress(Progress{Phase: "capability"})
	cp, err := c.readCapability(ctx, o.Group)
	if err != nil {
		return res, c, err
	}
	if o.ClientID != "" {
		o.Progress(Progress{Phase: "auth"})
		if c.auth, err = newAuthenticator(ctx, c); err != nil {
			return res, c, err
		}
	}
	st, err := newStage(o.StagingDir, o.MaxLine)
	if err != nil {
		return res, c, fmt.Errorf("staging: %w", err)
	}
	defer st.remove()
	st.space = o.Space
	if err := st.checkSpace(0); err != nil {
		return res, c, err
	}
	var request string
	if cp.exportPath != "" && !o.NoBulk {
		res.Mode = "bulk"
		br, err := c.bulkExport(ctx, st, cp.exportPath, since)
		if err != nil {
			return res, c, err
		}
		res.Next, request = br.transactionTime, br.request
	} else {
		res.Mode = "rest"
		types := o.Types
		if len(types) == 0 {
			types = cp.types
		}
		if len(types) == 0 {
			return res, c, fmt.Errorf("%w: GET /metadata: the CapabilityStatement offers neither $export nor a searchable resource type", ErrServer)
		}
		sort.Strings(types)
		n := 0
		for _, t := range types {
			from := since
			if !since.IsZero() && !slices.Contains(searched, t) {
				// Not searched by the previous sync (listed since, or the
				// previous sync was a Bulk export or kept no list): what
				// it held before since may never have been fetched.
				from = time.Time{}
				res.New = append(res.New, t)
			}
			k, err := c.restSearch(ctx, st, t, from, n)
			if err != nil {
				return res, c, err
			}
			n += k
		}
		res.Searched = types
		// The next increment starts at the server's clock (its Date header,
		// truncated to the second) before the first search: whatever
		// changed during this sync, or in that second, is fetched again.
		res.Next, request = cp.serverTime, "REST search of "+fmt.Sprint(len(types))+" types"
	}
	// Attachments whose url names a Binary of this server that the export
	// or search did not hold: fetched now, as the reader would refuse them.
	if res.Binaries, err = c.fetchBinaries(ctx, st, full); err != nil {
		return res, c, err
	}
	res.Resources, res.Types = st.total(), st.counts
	res.Skipped.Outcomes, res.Skipped.Includes = st.outcomes, st.includes
	if err := st.finish(res.Next, stagedRequest(c.base)); err != nil {
		return res, c, fmt.Errorf("staging: %w", err)
	}
	switch {
	case res.Resources == 0 && st.deleted == 0 && !full:
		// Nothing changed: nothing to import; the state advances.
		o.Progress(Progress{Phase: "import", Detail: "nothing changed"})
		return res, c, nil
	case res.Resources == 0 && full:
		// A full sync of nothing would retire everything from this base:
		// an empty answer is more likely a fault than an empty server.
		return res, c, fmt.Errorf("%w: a full sync got no resources at all (%s); nothing was retired", ErrServer, request)
	}
	// Only a full sync of every type holds everything the server has: a
	// sync restricted to some types never retires (the importer's full
	// would retire every other type of this server).
	retire := full && len(o.Types) == 0
	// The import writes about what was staged again, into the catalog on
	// the same volume, before the staged files go.
	if err := st.checkSpace(st.bytes); err != nil {
		return res, c, err
	}
	o.Progress(Progress{Phase: "import", Resources: res.Resources})
	imported, err := o.Importer.Import(ctx, filepath.Join(st.dir, ManifestName), retire)
	if err != nil {
		return res, c, fmt.Errorf("%w: %w", ErrImport, err)
	}
	// What the import retired, not what the server listed (st.deleted).
	res.Deleted, res.DeletesIgnored = imported.Deleted, imported.DeletesIgnored
	res.Skipped.Reads += imported.Skipped.Reads
	res.Skipped.Outcomes += imported.Skipped.Outcomes
	return res, c, nil
}

// covers reports whether a state of the types have (empty: every type)
// continues into a sync of want (empty: every type).
func covers(have, want []string) bool {
	if len(have) == 0 {
		return true
	}
	if len(want) == 0 {
		return false
	}
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// lockBase takes the exclusive, non-blocking lock of base's sync: an
// flock(2) on StateDir/sync-<id>.lock. The file exists only while a sync
// holds it: the returned unlock removes it before it lets go, so that a
// sync that never got anywhere (a base never reached) leaves the directory
// as it found it. A lock file another sync removed between this one's
// open and its flock is not the lock any more (a third sync may have
// created and locked a new one): holdLock sees the name now points
// elsewhere, and the lock is taken again on the new file. A file a killed
// sync left behind is taken by the next sync and removed by it.
func lockBase(dir, base string) (func(), error) {
	p := statePath(dir, base)
	p = p[:len(p)-len(filepath.Ext(p))] + ".lock"
	for range maxLockTries {
		f, err := openLock(dir, p)
		if err != nil {
			return nil, err
		}
		unlock, err := holdLock(f, p)
		if errors.Is(err, errLockGone) {
			continue
		}
		return unlock, err
	}
	// Each try found the file removed under it: other syncs of this base
	// keep coming and going.
	return nil, fmt.Errorf("%w: %s", ErrBusy, p)
}

// maxLockTries bounds lockBase's tries when the lock file keeps being
// removed between its open and its flock.
const maxLockTries = 100

// errLockGone: the lock file was flocked after another sync removed its
// name; the flock excludes no one.
var errLockGone = errors.New("fhirsync: the lock file was removed")

// openLock opens (or creates) the lock file p of a sync in dir.
func openLock(dir, p string) (*os.File, error) {
	// Not following a symbolic link: the lock file is in a directory its
	// owner controls, and a sync run as root created the target of a
	// symbolic link there.
	f, created, err := regularfile.OpenCreate(p, os.O_RDWR, 0o600, regularfile.NoFollow)
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%w: the sync lock file %s is %s, not a regular file: custos creates it as an empty file; remove it (with no sync running) and retry", ErrBadConfig, p, nr.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	// Run as root on a stopped server's files, a lock it creates stays the
	// data directory owner's: root's, the server's scheduled sync could not
	// open it. One that already existed keeps its owner: it may be a root
	// file's second name (see regularfile.OpenCreate).
	if created {
		owner.Match(f, dir)
	}
	return f, nil
}

// holdLock flocks f, the lock file opened at p, and returns its unlock,
// which removes p and then releases the flock. f is closed on an error:
// ErrBusy when another sync holds it, errLockGone when p no longer names
// f (removed by the sync that held it, perhaps created again by another).
func holdLock(f *os.File, p string) (func(), error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrBusy, p)
		}
		return nil, err
	}
	release := func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }
	if !namesFile(p, f) {
		release()
		return nil, errLockGone
	}
	return func() {
		// Removed while still held: a sync that opens the file before the
		// removal and flocks it after finds it gone (namesFile).
		if namesFile(p, f) {
			os.Remove(p)
		}
		release()
	}, nil
}

// namesFile reports whether p (not followed) is the file f has open.
func namesFile(p string, f *os.File) bool {
	have, err := f.Stat()
	if err != nil {
		return false
	}
	at, err := os.Lstat(p)
	return err == nil && os.SameFile(have, at)
}
