package synthbundle

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestWrite: the Bundle is one JSON object of at least the size asked,
// the same bytes each time, with as many entries as Summary says, every
// fullUrl once, and every reference naming an entry's fullUrl.
func TestWrite(t *testing.T) {
	var a, b bytes.Buffer
	sum, err := Write(&a, Options{Bytes: 300_000, Observations: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(&b, Options{Bytes: 300_000, Observations: 10}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of the same Options differ")
	}
	if sum.Bytes != int64(a.Len()) || sum.Bytes < 300_000 {
		t.Fatalf("Summary.Bytes %d, wrote %d, asked at least 300000", sum.Bytes, a.Len())
	}
	var bundle struct {
		ResourceType, Type string
		Entry              []struct {
			FullURL  string          `json:"fullUrl"`
			Resource json.RawMessage `json:"resource"`
			Request  struct{ Method, URL string }
		}
	}
	if err := json.Unmarshal(a.Bytes(), &bundle); err != nil {
		t.Fatal(err)
	}
	if bundle.ResourceType != "Bundle" || bundle.Type != "transaction" || len(bundle.Entry) != sum.Resources {
		t.Fatalf("a %s %s of %d entries; Summary says %d resources", bundle.Type, bundle.ResourceType, len(bundle.Entry), sum.Resources)
	}
	full := map[string]bool{}
	for _, e := range bundle.Entry {
		if full[e.FullURL] || !strings.HasPrefix(e.FullURL, "urn:uuid:") || e.Request.Method != "POST" {
			t.Fatalf("entry %s: a fullUrl repeated or not a urn:uuid, or not a POST", e.FullURL)
		}
		full[e.FullURL] = true
	}
	refs := 0
	for _, e := range bundle.Entry {
		for _, part := range strings.Split(string(e.Resource), `"reference": "`)[1:] {
			ref, _, _ := strings.Cut(part, `"`)
			if !full[ref] {
				t.Fatalf("entry %s: a reference to no entry", e.FullURL)
			}
			refs++
		}
	}
	if refs < sum.Resources {
		t.Fatalf("%d references in %d entries: the entries should refer to each other", refs, sum.Resources)
	}
}
