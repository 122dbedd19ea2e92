package synth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/store/synth"
)

func ExampleGenerate() {
	tmp, err := os.MkdirTemp("", "synth-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	sum, err := synth.Generate(context.Background(), filepath.Join(tmp, "data"), synth.Options{Patients: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.Patients, "patients,", sum.Resources, "resources")
	fmt.Println("estimate:", synth.Estimate(10))
	fmt.Println("notes:", sum.ByType["note"], "reports:", sum.ByType["report"])
	// Output:
	// 10 patients, 103 resources
	// estimate: 103
	// notes: 10 reports: 2
}
