package fhirsync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/custos-mcp/custos/fhirin"
)

// searchBundle is one page of a searchset Bundle. Resources stay raw: they
// are written to the staging file as the server sent them.
type searchBundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
		Search   struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

// maxPages bounds the pages of one search: a server whose next links loop
// is an error, not an endless sync.
const maxPages = 1 << 20

// restSearch pages GET [base]/typ?_count=N[&_lastUpdated=ge<since>]
// following link[relation=next], writing the matches into a staging file
// of typ through the same checks as a Bulk download.
//
// A search of more than one page is paged a second time, staging only the
// matches the first pass did not have. Servers commonly page by offset
// (_offset, as Medplum does): a resource deleted while the sync pages
// shifts every later match one place back, and the match at the next
// page's start is on no page. A full sync retires what it did not fetch,
// so that live resource was retired (and an increment never fetched it):
// TestSyncRESTDeletionDuringPagingRetiresNoLiveResource. The second pass
// finds it unless another deletion shifts the same place again. What the
// first pass staged twice (a creation shifting matches forward) is left to
// the importer, as before: an exact repeat is imported once.
func (c *client) restSearch(ctx context.Context, st *stage, typ string, since time.Time, done int) (int, error) {
	u, _ := c.resolve(typ)
	q := url.Values{"_count": {strconv.Itoa(c.o.PageSize)}}
	if !since.IsZero() {
		// ge, not gt: since has second precision (the Date header), and
		// a FHIR date value is the range its precision implies (R4
		// search, "Date parameters"): gt<12:00:00> matches only from
		// 12:00:01 on, so a resource updated at 12:00:00.5, after the
		// previous sync's search, would never be fetched.
		q.Set("_lastUpdated", "ge"+since.UTC().Format(time.RFC3339))
	}
	u.RawQuery = q.Encode()
	// Pages go to a temporary NDJSON file, which copyNDJSON then checks and
	// stages like a downloaded file.
	tmp, err := os.CreateTemp(st.dir, ".search-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	w := bufio.NewWriterSize(tmp, 256<<10)
	s := &searchPass{c: c, st: st, w: w, typ: typ, done: done, ids: map[string]bool{}}
	pages, err := s.run(ctx, u)
	if err == nil && pages > 1 {
		s.pass++
		_, err = s.run(ctx, u)
	}
	if err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return st.copyNDJSON(tmp, "search "+typ+" ("+filepath.Base(tmp.Name())+")", typ, false)
}

// searchPass pages one search of typ, writing its matches to w and their
// ids to ids; a pass after the first writes only those not in ids.
type searchPass struct {
	c    *client
	st   *stage
	w    *bufio.Writer
	typ  string
	done int             // resources of earlier types, for progress
	ids  map[string]bool // the ids of the matches written
	n    int             // matches written
	pass int             // 0 for the first pass
}

// run pages the search from u and returns the number of pages.
func (s *searchPass) run(ctx context.Context, u *url.URL) (int, error) {
	c, typ := s.c, s.typ
	seen := map[string]bool{}
	var buf bytes.Buffer
	page := 0
	for ; u != nil; page++ {
		if page >= maxPages || seen[u.String()] {
			return 0, fmt.Errorf("%w: GET %s: the search's next links loop", ErrServer, where(u))
		}
		seen[u.String()] = true
		resp, err := c.get(ctx, u, "application/fhir+json", nil)
		if err != nil {
			return 0, fmt.Errorf("search %s: %w", typ, err)
		}
		var b searchBundle
		err = decodeJSON(resp, jsonTypes, &b)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if b.ResourceType != "Bundle" || b.Type != "searchset" {
			return 0, fmt.Errorf("%w: GET %s: not a searchset Bundle", ErrServer, where(u))
		}
		for i, e := range b.Entry {
			if len(e.Resource) == 0 {
				return 0, fmt.Errorf("%w: GET %s: entry %d has no resource", ErrServer, where(u), i)
			}
			if oo, code, bad := fhirin.Outcome(e.Resource); oo && (e.Search.Mode == "outcome" || typ != "OperationOutcome") {
				if bad {
					// The server says the search failed: what it did return
					// is not the whole result (a full sync would retire the rest).
					return 0, fmt.Errorf("%w: GET %s: entry %d is an OperationOutcome with an error (code %q): the search did not complete", ErrServer, where(u), i, code)
				}
				if s.pass == 0 {
					s.st.outcomes++ // counted once: the second pass pages the same search
				}
				continue // a warning or information about the search, with or without search.mode
			}
			switch e.Search.Mode {
			case "", "match":
			case "include":
				// A resource the server added beside the matches; custos
				// asks for no _include. Its own type's search stages it
				// (Skipped.Includes).
				if s.pass == 0 {
					s.st.includes++
				}
				continue
			case "outcome":
				// An OperationOutcome is handled above: this is another
				// resource marked as an outcome, as fhirin refuses it.
				return 0, fmt.Errorf("%w: GET %s: entry %d has search.mode outcome but holds a resource that is not an OperationOutcome", ErrServer, where(u), i)
			default:
				return 0, fmt.Errorf("%w: GET %s: entry %d has search.mode %.40q, not match, include or outcome", ErrServer, where(u), i, e.Search.Mode)
			}
			buf.Reset()
			if err := json.Compact(&buf, e.Resource); err != nil {
				return 0, fmt.Errorf("%w: GET %s: entry %d: malformed resource", ErrServer, where(u), i)
			}
			// Checked here, not only when the pages are staged: an error
			// names the page and the entry, not a line of the temporary
			// file of all the pages.
			id, err := checkEntry(buf.Bytes(), typ)
			if err != nil {
				return 0, fmt.Errorf("%w: GET %s (page %d): entry %d: %v", ErrServer, where(u), page+1, i, err)
			}
			if s.pass > 0 && (id == "" || s.ids[id]) {
				continue // the first pass staged it (a Bundle may have no id: checkResource)
			}
			s.ids[id] = true
			// The pages are staged twice (here, then copyNDJSON): both count.
			if err := s.st.staged(buf.Len() + 1); err != nil {
				return 0, err
			}
			s.w.Write(buf.Bytes())
			s.w.WriteByte('\n')
			s.n++
		}
		c.o.Progress(Progress{Phase: "search", Detail: typ, Resources: s.done + s.n})
		next := ""
		for _, l := range b.Link {
			if l.Relation == "next" {
				next = l.URL
			}
		}
		u = nil
		if next != "" {
			if u, err = c.resolve(next); err != nil {
				return 0, err
			}
		}
	}
	return page, nil
}

// checkEntry checks a search entry's resource as checkResource checks a
// staged line, and that it is of the searched type; it returns its id.
func checkEntry(b []byte, typ string) (string, error) {
	if err := checkResource(b, ""); err != nil {
		return "", err
	}
	var head struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	json.Unmarshal(b, &head) // checkResource: an object with a resourceType and an id
	if head.ResourceType != typ {
		if !fhirin.IsResourceType(head.ResourceType) {
			// Not a type name but the server's content: never quoted.
			return "", fmt.Errorf("a resourceType that is no R4 type in a search of %q", typ)
		}
		return "", fmt.Errorf("resourceType %q in a search of %q", head.ResourceType, typ)
	}
	return head.ID, nil
}
