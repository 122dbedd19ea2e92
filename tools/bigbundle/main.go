// Command bigbundle writes a large synthetic FHIR transaction Bundle
// (internal/synthbundle) to a file, for measuring custos import's memory:
//
//	go run ./tools/bigbundle -mb 250 -o /tmp/big.json
//
// The file is written beside its name and renamed into place, so a run
// that fails leaves no partial file.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/internal/synthbundle"
)

func main() {
	mb := flag.Int64("mb", 50, "size to reach, in MB (10^6 bytes)")
	out := flag.String("o", "", "the Bundle file to write (required)")
	flag.Parse()
	if *out == "" || *mb <= 0 {
		fmt.Fprintln(os.Stderr, "bigbundle: -o FILE and a positive -mb are required")
		os.Exit(2)
	}
	if err := write(*out, *mb*1_000_000); err != nil {
		fmt.Fprintln(os.Stderr, "bigbundle:", err)
		os.Exit(1)
	}
}

func write(path string, size int64) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".bigbundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	sum, err := synthbundle.Write(f, synthbundle.Options{Bytes: size})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	fmt.Printf("%s: %d bytes, %d patients, %d resources\n", path, sum.Bytes, sum.Patients, sum.Resources)
	return nil
}
