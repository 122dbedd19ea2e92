package server

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/store"
)

func TestSplitPages(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		size int
		want []string
	}{
		{"empty is one empty page", "", 4, []string{""}},
		{"short", "abc", 4, []string{"abc"}},
		{"exact", "abcd", 4, []string{"abcd"}},
		{"split", "abcdefghi", 4, []string{"abcd", "efgh", "i"}},
		{"never splits a rune", "abcé€x", 4, []string{"abc", "é", "€x"}},
		{"four-byte rune", "a😀b", 4, []string{"a", "😀", "b"}},
		{"invalid utf-8 is cut at size", "\xff\xff\xff\xff\xff", 4, []string{"\xff\xff\xff\xff", "\xff"}},
		{"continuation bytes only", "\x80\x80\x80\x80\x80", 4, []string{"\x80\x80\x80\x80", "\x80"}},
	} {
		var got []string
		for _, p := range splitPages([]byte(tc.text), tc.size) {
			got = append(got, string(p))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzSplitPages: pages concatenate to the input, are never longer than
// size, never empty unless the input is, and of valid UTF-8 input are
// valid UTF-8 each (no character is split).
func FuzzSplitPages(f *testing.F) {
	f.Add("Patient seen for follow-up. Café — naïve 😀", 5)
	f.Add("", 4)
	f.Fuzz(func(t *testing.T, text string, size int) {
		if size < utf8.UTFMax || size > 1<<12 {
			return
		}
		pages := splitPages([]byte(text), size)
		if got := bytes.Join(pages, nil); string(got) != text {
			t.Fatalf("pages do not concatenate to the input")
		}
		for i, p := range pages {
			if len(p) > size || (len(p) == 0 && text != "") {
				t.Fatalf("page %d has %d bytes (size %d)", i, len(p), size)
			}
			if utf8.ValidString(text) && !utf8.Valid(p) {
				t.Fatalf("page %d splits a character", i)
			}
		}
	})
}

// Golden vectors of the entity tag: unminimized it is the audit digest
// reference; minimized a keyed tag, independent of obligation order and
// never containing the stored digest.
func TestETag(t *testing.T) {
	r := store.Resource{Digest: "sha256:" + strings.Repeat("ab", 32), Version: 3}
	if got := entityTag(r, policy.Decision{Allow: true}, nil); got != "sha256:"+strings.Repeat("ab", 32)+"@v3" {
		t.Fatalf("unminimized etag %q", got)
	}
	obs := []minimize.Obligation{{Op: minimize.OpRemove, Path: "/name"}, {Op: minimize.OpScrub, Path: ""}}
	d := policy.Decision{Allow: true, Obligations: obs}
	if got := entityTag(r, d, nil); got != "" {
		t.Fatalf("minimized etag without a key: %q", got)
	}
	got := entityTag(r, d, testKey)
	if got != "m1:"+etagGolden || strings.Contains(got, "abab") || strings.ContainsAny(got[3:], "0123456789") {
		t.Fatalf("minimized etag %q, want m1:%s", got, etagGolden)
	}
	rev := policy.Decision{Allow: true, Obligations: []minimize.Obligation{obs[1], obs[0]}}
	if entityTag(r, rev, testKey) != got {
		t.Error("etag depends on obligation order")
	}
	r2 := r
	r2.Version = 4
	if entityTag(r2, d, testKey) == got || entityTag(r, policy.Decision{Allow: true, Obligations: obs[:1]}, testKey) == got || entityTag(r, d, bytes.Repeat([]byte{8}, 32)) == got {
		t.Error("etag does not change with the version, the obligations or the key")
	}
}

// The key of minimized entity tags is derived from the cursor key (HKDF),
// never the cursor key itself; the tag a client receives is keyed with it.
func TestEntityTagKey(t *testing.T) {
	k := entityTagKey(testKey)
	if hex.EncodeToString(k) != entityTagKeyGolden {
		t.Fatalf("entityTagKey = %x, want %s", k, entityTagKeyGolden)
	}
	if entityTagKey(nil) != nil {
		t.Error("a key derived from no cursor key")
	}
	r := store.Resource{Digest: "sha256:" + strings.Repeat("ab", 32), Version: 3}
	d := policy.Decision{Allow: true, Obligations: []minimize.Obligation{{Op: minimize.OpRemove, Path: "/name"}, {Op: minimize.OpScrub, Path: ""}}}
	if got := entityTag(r, d, k); got != "m1:"+etagDerivedGolden {
		t.Fatalf("minimized entity tag under the derived key %q, want m1:%s", got, etagDerivedGolden)
	}
}

// entityTagKeyGolden is HKDF-SHA256(ikm 0x07*32, no salt, info
// "custos/etag-key/v1", 32 bytes), and etagDerivedGolden the tag of
// TestETag's resource and obligations under it, both computed independently
// (Python hmac, RFC 5869 by hand).
const (
	entityTagKeyGolden = "12a22880084013f53ed3ee6aa71973921d62f5faeda70ae73d4792b50b46aead"
	etagDerivedGolden  = "ggjkmdbjcmgpkblgmbcomijldfhpegem" // under "custos/etag/v2" (ViewVersion 2): ibblkclpjalbbnlnbblkjpgcjgibpogj
)

// etagGolden is letterHex(HMAC-SHA256(0x07*32, "custos/etag/v3" 0x00
// "sha256:abab…ab@v3" 0x00 "remove:/name" 0x00 "scrub:")[:16]), computed
// independently (Python hmac; hex 13dcd373c24196e27c6117088771499a with
// 0-f written a-p; the same script gives the v2 goldens). Under
// "custos/etag/v2", the views before h-typed (minimize.ViewVersion 2), it
// was npphalhmccgndfcmlfopjgpfckenjcjc; under "custos/etag/v1", the views
// before h-views (minimize.ViewVersion 1), kjoeifpjcfpdoinhakhfjdfgneclpnbe.
const etagGolden = "bdnmndhdmcebjgochmgbbhaiihhbejjk"
