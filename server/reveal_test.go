package server_test

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/server"
)

// Channels through which a caller could learn of a resource it may not
// see, other than the answer to reading it (TestDeniedAndNotFoundLookAlike
// ButAuditKnows): each test here acts as a caller who may not see some
// resources and checks that what it is given says nothing of them.

// A list cursor is sealed, but its length is visible: it must not follow
// the length of the last URI examined, which is a hidden resource whenever
// a page ends on the scan budget (its scheme and FHIR type would show
// through the length). Every cursor has one length.
func TestCursorLengthSaysNothingOfTheLastURIExamined(t *testing.T) {
	f := newFixture(t, "")
	// A small scan budget (at least a page) ends many pages on an entry
	// the clinician may not see (another care team's patient, a sensitive
	// record).
	f.reconfigure(func(c *server.Config) { c.PageSize, c.ScanLimit = 4, 4 })
	cs := f.connect(f.identity("clinician"))
	lengths := map[int]int{}
	cursor, pages, seen := "", 0, 0
	for {
		res, err := cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		seen += len(res.Resources)
		if res.NextCursor == "" {
			break
		}
		lengths[len(res.NextCursor)]++
		cursor = res.NextCursor
	}
	if pages < 20 || seen == 0 {
		t.Fatalf("%d pages, %d items: the listing should take many pages and show something", pages, seen)
	}
	if len(lengths) != 1 {
		ls := make([]int, 0, len(lengths))
		for l := range lengths {
			ls = append(ls, l)
		}
		slices.Sort(ls)
		t.Fatalf("cursor lengths vary with the position (%v over %d pages): they reveal the length of the last URI examined", ls, pages)
	}
}
