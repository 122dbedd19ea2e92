package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names, meta keys and the schema version; see doc.go for the layout.
var (
	bucketResources = []byte("resources")
	bucketVersions  = []byte("versions")
	bucketBlobs     = []byte("blobs")
	bucketMeta      = []byte("meta")
	// bucketIDs indexes the resources of streaming imports: keyed resource
	// id (16 bytes) -> URI of its current (or last) URI.
	bucketIDs = []byte("ids")
	// bucketCarried records which lifted attachments each carrier resource
	// of a streaming import carries: keyed id of the carrier (16 bytes) ||
	// keyed id of the attachment (16 bytes) -> empty. An import retires
	// the attachments a carrier it names no longer carries (stream.go,
	// retireUncarried).
	bucketCarried = []byte("carried")

	metaSchemaKey     = []byte("schema")
	metaEncryptionKey = []byte("encryption")
	metaKEKKey        = []byte("kek")
	metaIDKeyKey      = []byte("id-key")
)

// SchemaVersion is the on-disk layout version that new catalogs get under
// meta/"schema". Version 2 added meta/"encryption" (and meta/"kek") and the
// envelope blob format. Open also accepts schemaV1, which has no
// "encryption" key and is always plaintext; it is upgraded to version 2 only
// when Reencrypt (or an Open with DataKeys of an empty catalog) records the
// envelope mode, so older binaries keep reading plaintext catalogs.
const SchemaVersion = 2

const schemaV1 = 1

// DefaultTimeout is how long Open waits for the file lock when
// Options.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// initialMmapSize reserves address space (not disk or memory) for the file
// mapping. Every time a commit grows the file past the mapping, bbolt remaps
// and first copies every dirty node of the transaction to the heap; a large
// import would otherwise remap a dozen times (measured: 14 GB allocated and
// 35 s spent committing 100,000 entries). It also lets read transactions run
// while a writer grows the file. 64-bit platforms only.
const initialMmapSize = 1 << 30 * (strconv.IntSize / 64)

// DigestPrefix prefixes every content digest (Resource.Digest).
const DigestPrefix = "sha256:"

// Labels are the attributes policy decides on. Tenant and Type always equal
// the corresponding segments of the resource URI. Patient is the patient as
// the EHR and the identity provider know it: for a manifest import it
// equals the URI's patient segment; for a FHIR import (ImportEntries) it is
// the SOURCE Patient id, and the URI carries its keyed id
// (ResourceID(key, tenant, "Patient", Patient)). "" for tenant-level
// reference data.
type Labels struct {
	Tenant      string   `json:"tenant"`
	Patient     string   `json:"patient"`
	Type        string   `json:"type"`
	Sensitivity []string `json:"sensitivity,omitempty"` // "hiv", "sud" (42 CFR Part 2), "psy", "eth", "sdv", "std", "sex", "restricted", "very-restricted", "vip", "residence"
	Consent     []string `json:"consent,omitempty"`     // "opt-out"
}

// Annotations are the MCP resource annotations.
type Annotations struct {
	Audience     []string  `json:"audience,omitempty"` // "user" | "assistant"
	Priority     float64   `json:"priority,omitempty"` // 0..1
	LastModified time.Time `json:"lastModified,omitzero"`
}

// Resource is one catalog entry: the MCP resource metadata plus the content
// digest, version and policy labels. It never holds the content itself.
type Resource struct {
	URI         string      `json:"uri"`
	Name        string      `json:"name"`
	Title       string      `json:"title,omitempty"`
	Description string      `json:"description,omitempty"`
	MIMEType    string      `json:"mimeType"`
	Size        int64       `json:"size"`
	Annotations Annotations `json:"annotations"`
	// Digest is the content digest "sha256:<hex>" of the blob, the key
	// Blob takes. It is stored under the JSON name "etag" (the catalog's
	// format since v1); it is not the entity tag a client receives, which
	// the server derives per decision.
	Digest  string `json:"etag"`
	Version int    `json:"version"` // 1-based, +1 on every changed re-import
	Labels  Labels `json:"labels"`
	// Source is "" for a manifest import and the import source of a
	// streaming import (EntryOptions.Source, e.g. "fhir"): a full import
	// retires only what its own source imported.
	Source string `json:"source,omitempty"`
	// PatientWide lists the labels of Labels.Sensitivity the item carries
	// only because its patient has them ("vip" of a VIP patient's item
	// whose own data lacks it; docs/import.md, "Patient-wide labels"): a
	// streaming import removes them when the patient loses the label, and
	// never propagates them as the item's own (OwnSensitivity). Empty for
	// most items and for every manifest import's.
	PatientWide []string `json:"patientWide,omitempty"`
	// Retired is set only on the version that retired the URI (a deletion,
	// or a full import that no longer mentions it): from then on the URI is
	// neither listed nor readable (Get, Page, Count), its versions stay.
	Retired time.Time `json:"retired,omitzero"`
}

// Options configure Open. The zero value is valid: discard logs, wait
// DefaultTimeout for the lock, open read-write, plaintext blobs.
type Options struct {
	// Logger receives operational logs (never content, keys or PHI). nil
	// discards.
	Logger *slog.Logger
	// Timeout is how long Open waits for the file lock before returning
	// ErrLocked. Zero means DefaultTimeout; negative is invalid.
	Timeout time.Duration
	// ReadOnly opens the file with a shared lock; the file must exist and be
	// an initialized store. Import and Reencrypt fail on a read-only store.
	ReadOnly bool
	// DataKeys enables envelope encryption at rest. nil means plaintext
	// mode. The catalog records its mode: a new (or still empty) catalog
	// takes the mode of the options it is opened read-write with; otherwise
	// Open returns ErrEncrypted (encrypted catalog, nil DataKeys),
	// ErrPlaintext (plaintext catalog with blobs, DataKeys set) or
	// ErrKEKMismatch (DataKeys.KEK differs from the recorded KEK).
	DataKeys DataKeys
	// MetadataOnly, with ReadOnly and without DataKeys, opens an encrypted
	// catalog for its metadata (Get, GetByID, Version, Page, Count,
	// PatientTenants, SegmentPatients): Blob returns ErrMetadataOnly, for
	// a plaintext catalog too. It is for commands that
	// read labels and never content ('custos btg grant' finding a
	// patient), which need no Vault access to data keys. Invalid
	// otherwise.
	MetadataOnly bool
	// Migrate, with DataKeys and read-write, lets Open accept a plaintext
	// catalog that holds blobs, for Reencrypt only: until Reencrypt has
	// converted it, Blob and Import return ErrPlaintext (Get, Version, Page
	// and Count work). On an encrypted catalog Migrate changes nothing.
	Migrate bool
}

func (o *Options) validate() error {
	if o.Timeout < 0 {
		return errors.New("store: negative lock timeout")
	}
	if o.MetadataOnly && (!o.ReadOnly || o.DataKeys != nil) {
		return errors.New("store: MetadataOnly needs ReadOnly and no DataKeys")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DataKeys != nil && o.DataKeys.KEK() == "" {
		return errors.New("store: data key provider has an empty KEK name")
	}
	if o.Migrate && o.DataKeys == nil {
		return errors.New("store: migrate needs a data key provider")
	}
	if o.Migrate && o.ReadOnly {
		return errors.New("store: migrate needs a read-write store")
	}
	return nil
}

// Store is the resource catalog and blob store in one bbolt file. It is safe
// for concurrent use by multiple goroutines; Import serializes with other
// writers through bbolt's single write transaction.
type Store struct {
	// mu guards db: every operation holds it shared; Reencrypt holds it
	// exclusively while it commits and swaps in the compacted file, and
	// Close while it closes.
	mu       sync.RWMutex
	db       *bolt.DB
	boltOpts bolt.Options
	log      *slog.Logger
	readOnly bool
	// keys is nil in plaintext mode. Blob and Import compare it with the
	// mode recorded in meta in each transaction, so a catalog opened with
	// Migrate serves blobs as soon as Reencrypt has committed.
	keys DataKeys
	// metadataOnly: opened with Options.MetadataOnly (an encrypted catalog
	// without keys: Blob refuses).
	metadataOnly bool
	// builtIndex: an ImportEntries into this store built an index the
	// catalog lacked (links, optout), so its scratch copy is renamed over
	// the catalog even if nothing else changed (staged).
	builtIndex bool
	// markedRules: a full ImportEntries into this store recorded another
	// label rules version than the catalog's, so its scratch copy is
	// renamed over the catalog even if nothing else changed (staged).
	markedRules bool
	// mappedAtRelease is the process's resident file-backed bytes
	// (residentFileBytes) right after release last dropped the mapping;
	// release drops it again only once they grew by releaseBudget.
	mappedAtRelease int64
}

// Open opens (creating it with mode 0600 unless opts.ReadOnly) the store at
// path. It returns ErrLocked if another holder keeps the file lock for longer
// than opts.Timeout, and ErrEncrypted, ErrPlaintext or an error wrapping
// ErrKEKMismatch if opts.DataKeys does not match the catalog's encryption
// mode (see Options.DataKeys).
func Open(path string, opts Options) (*Store, error) { return open(path, opts, false) }

// open is Open; scratch opens a staged import's scratch copy, whose commits
// need not be durable one by one (bbolt NoSync, NoGrowSync): the copy is
// synced whole before it is renamed over the catalog (staged), and a copy
// left by a crash is never used.
func open(path string, opts Options, scratch bool) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bo := bolt.Options{
		Timeout:         opts.Timeout,
		ReadOnly:        opts.ReadOnly,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize,
		NoSync:          scratch,
		NoGrowSync:      scratch,
	}
	db, err := openBolt(path, &bo)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, boltOpts: bo, log: opts.Logger, readOnly: opts.ReadOnly, keys: opts.DataKeys, metadataOnly: opts.MetadataOnly}
	if err := s.init(opts.Migrate); err != nil {
		db.Close()
		return nil, err
	}
	s.log.Debug("store opened", "read_only", opts.ReadOnly, "encrypted", s.keys != nil, "migrate", opts.Migrate)
	return s, nil
}

func openBolt(path string, bo *bolt.Options) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("store: open: %w", err)
	}
	return db, nil
}

// encryption reads the catalog's recorded mode and KEK name.
func encryption(tx *bolt.Tx) (mode, kek string, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return "", "", errors.New("store: file is not an initialized custos store")
	}
	v := meta.Get(metaSchemaKey)
	if len(v) != 4 {
		return "", "", errors.New("store: unsupported schema version")
	}
	enc := meta.Get(metaEncryptionKey)
	switch binary.BigEndian.Uint32(v) {
	case schemaV1:
		if enc != nil {
			return "", "", fmt.Errorf("%w: schema 1 catalog records an encryption mode", ErrCorrupt)
		}
		return EncryptionNone, "", nil
	case SchemaVersion:
	default:
		return "", "", errors.New("store: unsupported schema version")
	}
	switch string(enc) {
	case EncryptionNone:
		return EncryptionNone, "", nil
	case EncryptionEnvelope:
		k := meta.Get(metaKEKKey)
		if len(k) == 0 {
			return "", "", fmt.Errorf("%w: encrypted catalog records no key-encryption key", ErrCorrupt)
		}
		return EncryptionEnvelope, string(k), nil
	}
	return "", "", errors.New("store: unsupported encryption mode")
}

// putEncryption records mode (and the provider's KEK) under schema 2.
func putEncryption(tx *bolt.Tx, mode string, keys DataKeys) error {
	meta := tx.Bucket(bucketMeta)
	err := meta.Put(metaSchemaKey, binary.BigEndian.AppendUint32(nil, SchemaVersion))
	if err == nil {
		err = meta.Put(metaEncryptionKey, []byte(mode))
	}
	if err == nil && mode == EncryptionEnvelope {
		err = meta.Put(metaKEKKey, []byte(keys.KEK()))
	}
	if err != nil {
		return fmt.Errorf("store: write meta: %w", err)
	}
	return nil
}

// init creates the buckets and the meta records on a new file, checks the
// schema version of an existing one, and reconciles the recorded encryption
// mode with s.keys.
func (s *Store) init(migrate bool) error {
	check := func(tx *bolt.Tx) error {
		mode, kek, err := encryption(tx)
		if err != nil {
			return err
		}
		for _, b := range [][]byte{bucketResources, bucketVersions, bucketBlobs} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: bucket %s missing", ErrCorrupt, b)
			}
		}
		switch {
		case mode == EncryptionEnvelope && s.keys == nil:
			if s.metadataOnly {
				return nil // Blob refuses
			}
			return ErrEncrypted
		case mode == EncryptionEnvelope && s.keys.KEK() != kek:
			return fmt.Errorf("%w: the catalog's data keys are wrapped under %q, but the provider offers %q", ErrKEKMismatch, kek, s.keys.KEK())
		case mode == EncryptionNone && s.keys != nil:
			empty := tx.Bucket(bucketBlobs).Stats().KeyN == 0
			switch {
			case empty && tx.Writable():
				// Nothing to convert: record the mode of the options.
				return putEncryption(tx, EncryptionEnvelope, s.keys)
			case empty:
				// Read-only and empty: there is nothing to read either way.
			case migrate:
				// Only Reencrypt will touch blobs (checkMode).
			default:
				return ErrPlaintext
			}
		}
		return nil
	}
	if s.readOnly {
		return s.db.View(check)
	}
	return s.commit(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			for _, b := range [][]byte{bucketResources, bucketVersions, bucketBlobs, bucketMeta} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("store: create bucket: %w", err)
				}
			}
			mode := EncryptionNone
			if s.keys != nil {
				mode = EncryptionEnvelope
			}
			if err := putEncryption(tx, mode, s.keys); err != nil {
				return err
			}
		}
		return check(tx)
	})
}

// view and update run fn in a bbolt transaction while holding mu shared.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.View(fn)
}

func (s *Store) update(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.commit(fn)
}

// Close releases the file lock and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Close()
}

// Encryption returns the catalog's recorded encryption mode (EncryptionNone
// or EncryptionEnvelope) and, for the latter, the KEK name its data keys are
// wrapped under. A catalog opened with Migrate reports EncryptionNone until
// Reencrypt has converted it.
func (s *Store) Encryption() (mode, kek string, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		mode, kek, err = encryption(tx)
		return err
	})
	return mode, kek, err
}

// Get returns the current version of the resource with the given URI. It
// returns an error wrapping ErrBadURI if uri is not canonical and ErrNotFound
// if no such resource was imported.
func (s *Store) Get(uri string) (Resource, error) {
	if _, err := ParseURI(uri); err != nil {
		return Resource{}, err
	}
	var r Resource
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketResources).Get([]byte(uri))
		if v == nil {
			return ErrNotFound
		}
		return decodeResource(v, &r)
	})
	return r, err
}

// GetByID returns the current version of the live resource that
// streaming imports named with the keyed resource id id (ResourceID, the
// last segment of its URI), wherever it is: the "ids" index gives its
// current URI, whose patient segment the caller need not know. The keyed
// id covers tenant, type and source id, so only that resource can be
// found. It returns ErrNotFound if no streaming import named it or it is
// retired, an error wrapping ErrBadURI if id is not a canonical UUID, and
// one wrapping ErrCorrupt if the index names a URI of another id.
func (s *Store) GetByID(id string) (Resource, error) {
	if !IsCanonicalUUID(id) {
		return Resource{}, uriErr("id is not a canonical uuid")
	}
	key := uuid.MustParse(id)
	var r Resource
	err := s.view(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketIDs)
		if ids == nil {
			return ErrNotFound
		}
		uri := ids.Get(key[:])
		if uri == nil {
			return ErrNotFound
		}
		if u, err := ParseURI(string(uri)); err != nil || u.ID != id {
			return fmt.Errorf("%w: the id index names a URI of another id", ErrCorrupt)
		}
		v := tx.Bucket(bucketResources).Get(uri)
		if v == nil {
			return ErrNotFound
		}
		return decodeResource(v, &r)
	})
	return r, err
}

// Version returns the given version (1-based) of the resource with the given
// URI from the history. It returns ErrNotFound if that version never existed.
func (s *Store) Version(uri string, version int) (Resource, error) {
	if _, err := ParseURI(uri); err != nil {
		return Resource{}, err
	}
	if version < 1 || version > 1<<31 {
		return Resource{}, ErrNotFound
	}
	var r Resource
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketVersions).Get(versionKey(uri, version))
		if v == nil {
			return ErrNotFound
		}
		return decodeResource(v, &r)
	})
	return r, err
}

// Page returns up to limit current resources whose URI is strictly greater
// than after (byte-wise), in ascending byte order of URI. after == "" starts
// at the first resource. A short (or empty) page means the end was reached.
// after need not be a stored URI, so a cursor stays valid when resources are
// added between calls.
func (s *Store) Page(after string, limit int) ([]Resource, error) {
	if limit <= 0 {
		return nil, errors.New("store: page limit must be positive")
	}
	var out []Resource
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketResources).Cursor()
		var k, v []byte
		if after == "" {
			k, v = c.First()
		} else {
			k, v = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, v = c.Next()
			}
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			var r Resource
			if err := decodeResource(v, &r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Count returns the number of resources (current versions).
func (s *Store) Count() (int, error) {
	var n int
	err := s.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketResources).Stats().KeyN
		return nil
	})
	return n, err
}

// Blob returns the content stored under digest ("sha256:<hex>", as in
// Resource.Digest), as a new slice. It returns ErrNotFound if no blob has that
// digest or digest is malformed.
//
// In an encrypted catalog Blob unwraps the blob's data key through
// Options.DataKeys (ctx bounds that call), then decrypts and authenticates
// the envelope against the digest. A provider failure returns a *KeyError
// (errors.Is ErrDataKey and the provider's error); it is not corruption.
//
// In both modes the plaintext is hashed on every read: a mismatch, an
// unparsable envelope or a failed authentication returns an *IntegrityError
// (wrapping ErrCorrupt) and no content.
func (s *Store) Blob(ctx context.Context, digest string) ([]byte, error) {
	if s.metadataOnly {
		return nil, ErrMetadataOnly // labels only, whatever the mode
	}
	key, ok := parseDigest(digest)
	if !ok {
		return nil, fmt.Errorf("%w: malformed digest", ErrNotFound)
	}
	var out []byte
	var mode string
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		if mode, _, err = encryption(tx); err != nil {
			return err
		}
		v := tx.Bucket(bucketBlobs).Get(key)
		if v == nil {
			return ErrNotFound
		}
		// Copy before hashing (or decrypting, which happens outside the
		// transaction because it may wait for the provider) so the bytes
		// verified are the bytes returned.
		out = bytes.Clone(v)
		if out == nil {
			out = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case mode == EncryptionEnvelope && s.keys != nil:
		if out, err = s.decrypt(ctx, digest, key, out, true); err != nil {
			return nil, err
		}
	case mode == EncryptionEnvelope:
		return nil, ErrEncrypted // unreachable: Open refused, and MetadataOnly returned above
	case s.keys != nil:
		return nil, ErrPlaintext // opened with Migrate, not converted yet
	}
	got := sha256.Sum256(out)
	if !bytes.Equal(got[:], key) {
		s.log.Error("blob integrity failure", "digest", digest)
		return nil, &IntegrityError{Digest: digest, Got: formatDigest(got)}
	}
	return out, nil
}

// decrypt opens the envelope value v of the blob stored under key. With
// inPlace the plaintext overwrites v's ciphertext; otherwise v is left
// intact. It does not check the hash.
func (s *Store) decrypt(ctx context.Context, digest string, key, v []byte, inPlace bool) ([]byte, error) {
	env, reason := parseEnvelope(v)
	if reason != "" {
		s.log.Error("blob integrity failure", "digest", digest, "reason", reason)
		return nil, &IntegrityError{Digest: digest, Reason: reason}
	}
	dk, err := s.keys.UnwrapDataKey(ctx, env.wrapped)
	if err != nil {
		return nil, &KeyError{Op: "unwrap", Digest: digest, Err: err}
	}
	var dst []byte
	if inPlace {
		dst = env.ciphertext[:0]
	}
	pt, reason, err := openBlob(dst, dk, env, key)
	if err != nil {
		return nil, &KeyError{Op: "unwrap", Digest: digest, Err: err}
	}
	if reason != "" {
		s.log.Error("blob integrity failure", "digest", digest, "reason", reason)
		return nil, &IntegrityError{Digest: digest, Reason: reason}
	}
	return pt, nil
}

// Digest returns the content digest of b in the form used by Resource.Digest:
// "sha256:" + lowercase hex SHA-256(b).
func Digest(b []byte) string { return formatDigest(sha256.Sum256(b)) }

func formatDigest(sum [sha256.Size]byte) string {
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// parseDigest returns the 32-byte key for "sha256:<64 lowercase hex>".
func parseDigest(d string) ([]byte, bool) {
	h, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return nil, false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, false
		}
	}
	key, err := hex.DecodeString(h)
	if err != nil {
		return nil, false
	}
	return key, true
}

// versionKey is uri || 0x00 || uint32be(version). URIs never contain 0x00,
// so keys of one URI are contiguous and ordered by version.
func versionKey(uri string, version int) []byte {
	k := make([]byte, 0, len(uri)+5)
	k = append(k, uri...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(version))
}

func decodeResource(v []byte, r *Resource) error {
	var tmp Resource
	if err := json.Unmarshal(v, &tmp); err != nil {
		return fmt.Errorf("%w: undecodable resource record", ErrCorrupt)
	}
	*r = tmp
	return nil
}
