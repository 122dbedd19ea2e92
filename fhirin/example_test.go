package fhirin_test

import (
	"context"
	"fmt"

	"github.com/custos-mcp/custos/fhirin"
)

// Read a Bulk Data export through its $export manifest. The Link callback
// is where the store puts an attachment's custos URI (keyed, opaque ids);
// here it is a placeholder.
func ExampleRead() {
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	counts := map[string]int{}
	err := fhirin.Read(context.Background(), "testdata/export-manifest.json", fhirin.Options{Link: link}, func(it fhirin.Item) error {
		switch {
		case it.Deleted:
			counts["retired"]++
		case it.Patient == "":
			counts["tenant-level"]++
		default:
			counts["in a patient compartment"]++
		}
		return nil
	})
	fmt.Println(err, counts)
	// Output: <nil> map[in a patient compartment:18 retired:2 tenant-level:4]
}
