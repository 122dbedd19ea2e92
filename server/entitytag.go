package server

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

// Three values about a resource's content travel in _meta, and only one of
// them is an entity tag (docs/uris.md, "Entity tags and lastModified"):
//
//   - the content digest (store.Resource.Digest, "sha256:<hex>" of the
//     stored bytes), under DigestKey ("etag", a name kept for the clients
//     that read it), with the version under VersionKey: given only when the
//     content is released unminimized;
//   - the content reference digestRef ("sha256:<hex>@v<N>"), which the
//     audit log records in digests;
//   - the entity tag of what the caller receives, under ETagKey
//     ("custos/etag"): entityTag, on every list item and read content.

// _meta keys of list items and read contents.
const (
	// ETagKey is the _meta key of the entity tag of the released
	// representation (entityTag): what a client compares to tell whether
	// what it holds is current.
	ETagKey = "custos/etag"
	// DigestKey is the _meta key of the stored content digest,
	// "sha256:<hex>" (store.Resource.Digest). Its wire name is "etag" for
	// compatibility, but it is not an entity tag: it is withheld whenever
	// the content is minimized.
	DigestKey = "etag"
	// VersionKey is the _meta key of the stored version (1-based), given
	// with DigestKey.
	VersionKey = "version"
)

// digestRef is the content reference recorded in the audit log:
// "sha256:<hex>@v<N>".
func digestRef(r store.Resource) string { return fmt.Sprintf("%s@v%d", r.Digest, r.Version) }

// The domains of minimized entity tags name minimize.ViewVersion (<V>
// above: "custos/etag/v3"): a view that minimize makes differently from the
// same stored version under the same obligations gets another tag
// ("custos/etag/v1" until h-views' prune and REDACTED label,
// "custos/etag/v2" until h-typed's typed mask, generalize and scrub, both
// 2026-12-07).
var (
	etagDomain         = "custos/etag/v" + strconv.Itoa(minimize.ViewVersion)
	researchEtagDomain = "custos/etag/research/v" + strconv.Itoa(minimize.ViewVersion)
)

// entityTag is the entity tag of r as released under d's obligations.
//
// Unminimized: digestRef(r), "sha256:<hex>@v<N>", a strong tag that is also
// the audit log's content reference. Minimized: a weak tag that must not
// reveal the stored digest (a guess of the unminimized content could be
// confirmed by hashing it):
//
//	"m1:" || letterHex( HMAC-SHA256(key, "custos/etag/v<V>" 0x00 digestRef(r) 0x00 obligations)[:16] )
//
// with the obligations' compact forms sorted and joined by 0x00, and key
// the entity-tag key (entityTagKey of the newest cursor key). Equal m1 tags
// mean the same stored version minimized under the same obligations.
// Without a key there is no tag ("").
func entityTag(r store.Resource, d policy.Decision, key []byte) string {
	if len(d.Obligations) == 0 {
		return digestRef(r)
	}
	if len(key) == 0 {
		return ""
	}
	return minimizedTag(key, etagDomain+"\x00"+digestRef(r), d)
}

// researchEntityTag is the entity tag of r released to a research caller
// under the URI shown (its research alias):
//
//	"m1:" || letterHex( HMAC-SHA256(key, "custos/etag/research/v<V>" 0x00 shown 0x00 digestRef(r) 0x00 obligations)[:16] )
//
// It differs from the tag any other caller gets for the same stored
// version and obligations (entityTag), so a tag cannot link an alias to
// the real URI. Without a key there is no tag ("").
func researchEntityTag(r store.Resource, d policy.Decision, key []byte, shown string) string {
	if len(key) == 0 {
		return ""
	}
	return minimizedTag(key, researchEtagDomain+"\x00"+shown+"\x00"+digestRef(r), d)
}

// minimizedTag is "m1:" || letterHex(HMAC-SHA256(key, prefix 0x00
// obligations)[:16]), the obligations' compact forms sorted and joined by
// 0x00.
func minimizedTag(key []byte, prefix string, d policy.Decision) string {
	obls := make([]string, len(d.Obligations))
	for i, o := range d.Obligations {
		obls[i] = o.String()
	}
	slices.Sort(obls)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(prefix + "\x00" + strings.Join(obls, "\x00")))
	return "m1:" + letterHex(mac.Sum(nil)[:16])
}

// entityTagInfo is the HKDF info of the entity-tag key.
const entityTagInfo = "custos/etag-key/v1"

// entityTagKey is the key of minimized entity tags, derived from a cursor
// key so that the cursor key itself keys nothing but cursors:
//
//	HKDF-SHA256(ikm = cursor key, salt = none, info = "custos/etag-key/v1", L = 32)
//
// (RFC 5869, crypto/hkdf). It rotates with the cursor key. nil if the
// cursor key is empty.
func entityTagKey(cursorKey []byte) []byte {
	if len(cursorKey) == 0 {
		return nil
	}
	k, err := hkdf.Key(sha256.New, cursorKey, nil, entityTagInfo, 32)
	if err != nil { // only for L > 255*32: cannot happen; no key, no tag
		return nil
	}
	return k
}

// letterHex is hex with the digits 0-f written as the letters a-p: a tag
// without digits can never look like (nor be flagged by a data-loss scanner
// as) a phone number, ZIP code, MRN or date.
func letterHex(b []byte) string {
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = 'a'+c>>4, 'a'+c&0x0f
	}
	return string(out)
}
