package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/audit"
	"golang.org/x/mod/sumdb/tlog"
)

// A record's inclusion proof checks against the tree head with nothing but
// the record's exact bytes: what an auditor holding a signed checkpoint
// (size, root) needs to be convinced that record 2 is in the log.
func ExampleLog_ProveRecord() {
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := audit.Open(filepath.Join(dir, "audit.db"), audit.Options{Node: "node-a"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := l.Append(ctx, audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow}); err != nil {
			log.Fatal(err)
		}
	}

	size, root, err := l.TreeHead(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var leaf tlog.Hash
	err = l.Records(ctx, 2, 2, func(_ uint64, canonical []byte) error {
		leaf = audit.LeafHash(canonical) // canonical is only valid during the call
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	proof, err := l.ProveRecord(2, size)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tree size:", size)
	fmt.Println("record 2 included:", tlog.CheckRecord(proof, size, root, 2-1, leaf) == nil)
	// Output:
	// tree size: 3
	// record 2 included: true
}
