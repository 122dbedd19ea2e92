package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names and the schema version; see doc.go for the layout.
var (
	bucketResources = []byte("resources")
	bucketVersions  = []byte("versions")
	bucketBlobs     = []byte("blobs")
	bucketMeta      = []byte("meta")

	metaSchemaKey = []byte("schema")
)

// SchemaVersion is the on-disk layout version stored under meta/"schema".
const SchemaVersion = 1

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

// DigestPrefix prefixes every content digest (ETag).
const DigestPrefix = "sha256:"

// Labels are the attributes policy decides on. Tenant, Patient and Type
// always equal the corresponding segments of the resource URI.
type Labels struct {
	Tenant      string   `json:"tenant"`
	Patient     string   `json:"patient"`
	Type        string   `json:"type"`
	Sensitivity []string `json:"sensitivity,omitempty"` // "hiv", "sud" (42 CFR Part 2), "vip"
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
	ETag        string      `json:"etag"`    // content digest "sha256:<hex>" of the blob
	Version     int         `json:"version"` // 1-based, +1 on every changed re-import
	Labels      Labels      `json:"labels"`
}

// Options configure Open. The zero value is valid: discard logs, wait
// DefaultTimeout for the lock, open read-write.
type Options struct {
	// Logger receives operational logs (never content or PHI). nil discards.
	Logger *slog.Logger
	// Timeout is how long Open waits for the file lock before returning
	// ErrLocked. Zero means DefaultTimeout; negative is invalid.
	Timeout time.Duration
	// ReadOnly opens the file with a shared lock; the file must exist and be
	// an initialized store. Import fails on a read-only store.
	ReadOnly bool
}

func (o *Options) validate() error {
	if o.Timeout < 0 {
		return errors.New("store: negative lock timeout")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Store is the resource catalog and blob store in one bbolt file. It is safe
// for concurrent use by multiple goroutines; Import serializes with other
// writers through bbolt's single write transaction.
type Store struct {
	db       *bolt.DB
	log      *slog.Logger
	readOnly bool
}

// Open opens (creating it with mode 0600 unless opts.ReadOnly) the store at
// path. It returns ErrLocked if another holder keeps the file lock for longer
// than opts.Timeout.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.Timeout,
		ReadOnly:        opts.ReadOnly,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("store: open: %w", err)
	}
	s := &Store{db: db, log: opts.Logger, readOnly: opts.ReadOnly}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	s.log.Debug("store opened", "read_only", opts.ReadOnly)
	return s, nil
}

// init creates the buckets and the schema marker on a new file and checks the
// schema version of an existing one.
func (s *Store) init() error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("store: file is not an initialized custos store")
		}
		v := meta.Get(metaSchemaKey)
		if len(v) != 4 || binary.BigEndian.Uint32(v) != SchemaVersion {
			return errors.New("store: unsupported schema version")
		}
		for _, b := range [][]byte{bucketResources, bucketVersions, bucketBlobs} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: bucket %s missing", ErrCorrupt, b)
			}
		}
		return nil
	}
	if s.readOnly {
		return s.db.View(check)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			for _, b := range [][]byte{bucketResources, bucketVersions, bucketBlobs, bucketMeta} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return fmt.Errorf("store: create bucket: %w", err)
				}
			}
			v := binary.BigEndian.AppendUint32(nil, SchemaVersion)
			if err := tx.Bucket(bucketMeta).Put(metaSchemaKey, v); err != nil {
				return fmt.Errorf("store: write schema: %w", err)
			}
		}
		return check(tx)
	})
}

// Close releases the file lock and closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Get returns the current version of the resource with the given URI. It
// returns an error wrapping ErrBadURI if uri is not canonical and ErrNotFound
// if no such resource was imported.
func (s *Store) Get(uri string) (Resource, error) {
	if _, err := ParseURI(uri); err != nil {
		return Resource{}, err
	}
	var r Resource
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketResources).Get([]byte(uri))
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
	err := s.db.View(func(tx *bolt.Tx) error {
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
	err := s.db.View(func(tx *bolt.Tx) error {
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
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketResources).Stats().KeyN
		return nil
	})
	return n, err
}

// Blob returns a copy of the content stored under digest ("sha256:<hex>",
// as in Resource.ETag). The bytes are hashed on every read: a mismatch
// returns an *IntegrityError (wrapping ErrCorrupt) and no content. It
// returns ErrNotFound if no blob has that digest or digest is malformed.
func (s *Store) Blob(digest string) ([]byte, error) {
	key, ok := parseDigest(digest)
	if !ok {
		return nil, fmt.Errorf("%w: malformed digest", ErrNotFound)
	}
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBlobs).Get(key)
		if v == nil {
			return ErrNotFound
		}
		// Copy before hashing so the bytes verified are the bytes returned.
		out = bytes.Clone(v)
		if out == nil {
			out = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256(out)
	if !bytes.Equal(got[:], key) {
		s.log.Error("blob integrity failure", "digest", digest)
		return nil, &IntegrityError{Digest: digest, Got: formatDigest(got)}
	}
	return out, nil
}

// Digest returns the content digest of b in the form used by Resource.ETag:
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
