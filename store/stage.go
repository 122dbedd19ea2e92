package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/internal/owner"
)

// ImportStaged is Import into the catalog file at catalogPath without ever
// writing to that file, so that it works while a server holds the catalog
// open read-only (see Live), and is all or nothing for the file as a whole:
//
//  1. take the import lock (catalogPath + ".import.lock"; a concurrent
//     ImportStaged waits opts.Timeout, then returns ErrLocked), and remove
//     the scratch files of imports killed before they could (removeScratch);
//  2. open the catalog read-only (a shared lock, held until step 5, so no
//     writer can change it in place meanwhile) and copy it, in one read
//     transaction, to a scratch file in the same directory (no catalog yet:
//     the scratch file starts empty);
//  3. Import into the scratch file, opened read-write with opts (so every
//     check of Import and of Open's encryption mode applies);
//  4. sync the scratch file and give it the catalog's permissions (and,
//     run as root, its owner: of the directory while there is no catalog);
//  5. rename it over catalogPath and sync the directory.
//
// On any failure the scratch file is removed and catalogPath is untouched.
// When the import changed nothing (every line unchanged) nothing is renamed,
// unless it built an index the catalog lacked (links, optout, vip): else every
// later import would build it again.
// A reader that opened the old file keeps reading it until it closes it;
// the rename assumes POSIX semantics (replacing an open file).
func ImportStaged(ctx context.Context, catalogPath, path string, opts Options, progress func(done, total int)) (ImportReport, error) {
	return stagedReport(ctx, catalogPath, opts, func(st *Store) (ImportReport, error) {
		return st.Import(ctx, path, progress)
	})
}

// ImportEntriesStaged is ImportEntries into the catalog file at
// catalogPath, staged like ImportStaged: the batches are committed into a
// scratch copy of the catalog, which is synced, reopened read-only with
// opts (meta page checksums, schema, encryption mode: what Live checks
// before it swaps a file in) and renamed over the catalog only when the
// whole stream was imported. (bbolt's full consistency check, tx.Check,
// would read the whole file into the resident set; the tests run it.) A
// failed import (a bad entry, a reader error, a provider failure, a
// canceled ctx) removes the scratch file and leaves the catalog
// byte-identical. Memory stays about one batch whatever the stream's size.
func ImportEntriesStaged(ctx context.Context, catalogPath string, entries iter.Seq2[Entry, error], eopts EntryOptions, opts Options) (ImportReport, error) {
	return ImportEntriesStagedFrom(ctx, catalogPath, func(*Store) iter.Seq2[Entry, error] { return entries }, eopts, opts)
}

// ImportEntriesStagedFrom is ImportEntriesStaged of the stream entries
// returns for the scratch copy being imported into: the stream may read
// that copy (Get) while it is pulled, to see the catalog exactly as this
// import does (fhirin.Options.StoredBinary), and must not write it or keep
// it past the import.
func ImportEntriesStagedFrom(ctx context.Context, catalogPath string, entries func(*Store) iter.Seq2[Entry, error], eopts EntryOptions, opts Options) (ImportReport, error) {
	return stagedReport(ctx, catalogPath, opts, func(st *Store) (ImportReport, error) {
		return st.ImportEntries(ctx, entries(st), eopts)
	})
}

// stagedReport is staged for an import: the copy replaces the catalog when
// the import changed something (or built an index the catalog lacked, or
// recorded another label rules version).
func stagedReport(ctx context.Context, catalogPath string, opts Options, fn func(*Store) (ImportReport, error)) (ImportReport, error) {
	var rep ImportReport
	err := staged(ctx, catalogPath, opts, func(st *Store) (bool, error) {
		var err error
		rep, err = fn(st)
		return rep.Created != 0 || rep.Updated != 0 || rep.Retired != 0 || rep.Relabelled != 0 || st.builtIndex || st.markedRules, err
	})
	if err != nil {
		return ImportReport{}, err
	}
	return rep, nil
}

// staged runs fn on a scratch copy of the catalog at catalogPath and, if it
// succeeds and says it changed something (or there was no catalog),
// renames the copy over the catalog (steps 1-5 of ImportStaged).
func staged(ctx context.Context, catalogPath string, opts Options, fn func(*Store) (changed bool, err error)) (err error) {
	if opts.ReadOnly {
		return errors.New("store: import into a read-only store")
	}
	if err := opts.validate(); err != nil {
		return err
	}
	unlock, err := lockFile(catalogPath+".import.lock", catalogPath, opts.Timeout)
	if err != nil {
		return err
	}
	defer unlock()

	dir, base := filepath.Dir(catalogPath), filepath.Base(catalogPath)
	removeScratch(dir, "."+base+".import-")
	f, err := os.CreateTemp(dir, "."+base+".import-*")
	if err != nil {
		return fmt.Errorf("store: create scratch file: %w", pathless(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	// Run as root (docs/operations.md's routine tasks), the copy is made
	// the catalog's owner's before it replaces the catalog: a root-owned
	// 0600 catalog.db kept the server, running as that account, out.
	owner.Match(f, catalogPath)

	perm := os.FileMode(0o600)
	var live *bolt.DB
	switch fi, serr := os.Stat(catalogPath); {
	case serr == nil:
		perm = fi.Mode().Perm()
		live, err = openBolt(catalogPath, &bolt.Options{ReadOnly: true, Timeout: opts.Timeout, FreelistType: bolt.FreelistMapType})
		if err != nil {
			f.Close()
			return err
		}
		defer live.Close()
		err = live.View(func(tx *bolt.Tx) error {
			_, err := tx.WriteTo(f)
			return err
		})
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("store: copy catalog: %w", pathless(err))
		}
	case errors.Is(serr, os.ErrNotExist):
		f.Close() // bbolt initializes an empty file
	default:
		f.Close()
		return fmt.Errorf("store: stat catalog: %w", pathless(serr))
	}

	st, err := open(tmp, opts, true)
	if err != nil {
		return err
	}
	changed, err := fn(st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if live != nil && !changed {
		os.Remove(tmp)
		return nil
	}
	if err := syncFile(tmp, perm); err != nil {
		return err
	}
	ro := opts
	ro.ReadOnly, ro.Migrate = true, false
	check, err := Open(tmp, ro)
	if err != nil {
		return fmt.Errorf("store: the staged catalog does not reopen: %w", err)
	}
	check.Close()
	if err := ctx.Err(); err != nil {
		return err // last point where the import can still be abandoned
	}
	if err := os.Rename(tmp, catalogPath); err != nil {
		return fmt.Errorf("store: replace catalog: %w", pathless(err))
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// removeScratch removes the scratch copies (prefix followed by the digits
// os.CreateTemp puts for "*") that imports killed before they could remove
// them left in dir (SIGKILL, power loss): each is a whole copy of the
// catalog, and every crash left one more. The caller holds the import lock,
// so no other import is writing one. Best effort: one that cannot be removed
// is left.
func removeScratch(dir, prefix string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		rest, ok := strings.CutPrefix(de.Name(), prefix)
		if !ok || rest == "" || !de.Type().IsRegular() || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		os.Remove(filepath.Join(dir, de.Name()))
	}
}

// syncFile sets path's permissions and flushes it to stable storage.
func syncFile(path string, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: sync scratch file: %w", pathless(err))
	}
	defer f.Close()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("store: sync scratch file: %w", pathless(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync scratch file: %w", pathless(err))
	}
	return nil
}
