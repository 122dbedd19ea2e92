package synth

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

// EdgeCases names the edge-case patients in the order of their patient
// index: EdgeCases[k] is patient #k. With fewer than len(EdgeCases)
// patients only the first Patients edge cases exist. The names are the keys
// of "edge_cases" in SUMMARY.json.
var EdgeCases = [...]string{"aged_92", "vip", "opted_out", "hiv", "sud", "zip3_restricted"}

const (
	edgeAged92 = iota
	edgeVIP
	edgeOptedOut
	edgeHIV
	edgeSUD
	edgeZIP3
)

// Layout names inside the output directory.
const (
	ManifestFile  = "manifest.jsonl"
	SummaryFile   = "SUMMARY.json"
	PrincipalsDir = "principals"
	manifestTemp  = ".manifest.jsonl.tmp"
)

// batchSize bounds memory: at most this many patients' manifest lines are
// held before they are streamed to the manifest in order.
const batchSize = 256

// shape is the number of resources of each kind patient #i has. It depends
// only on the index, never on the seed, so Estimate is exact without
// generating anything.
type shape struct {
	observations, conditions, encounters int
	media                                bool // a lab report PDF and an image
}

func shapeOf(i int) shape {
	s := shape{observations: 2 + i%3, conditions: 1, encounters: 1, media: i%5 == 0}
	if i%3 == 1 {
		s.conditions = 2
	}
	if i%4 == 0 {
		s.encounters = 2
	}
	return s
}

// resources = Patient + Observations + Conditions + MedicationRequest +
// Encounters + Coverage + note (+ report + image).
func (s shape) resources() int {
	n := 1 + s.observations + s.conditions + 1 + s.encounters + 1 + 1
	if s.media {
		n += 2
	}
	return n
}

// Estimate returns exactly the number of resources (manifest lines) that
// Generate writes for the given number of patients, whatever the seed: about
// 10 per patient (9.98 on average), and the payers' Organizations. It
// returns 0 for patients < 1.
func Estimate(patients int) int {
	if patients < 1 {
		return 0
	}
	n := len(payors)
	for i := 0; i < patients; i++ {
		n += shapeOf(i).resources()
	}
	return n
}

// Generate writes a synthetic data set for opts.Patients patients into dir,
// which must not exist or be an empty directory. The output is a pure
// function of opts (Progress aside): the same options produce a
// byte-identical tree.
//
// manifest.jsonl is written last, by renaming a fully written and synced
// temporary file, so a failed or cancelled run leaves no manifest and
// cannot be imported by mistake. Errors: ErrInvalidOptions, ErrDirNotEmpty,
// ctx.Err(), or an I/O error.
func Generate(ctx context.Context, dir string, opts Options) (Summary, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	if err := prepareDir(dir); err != nil {
		return Summary{}, err
	}
	g := newGenerator(dir, o)
	sum, err := g.run(ctx)
	if err != nil {
		os.Remove(filepath.Join(dir, manifestTemp))
		return Summary{}, err
	}
	return sum, nil
}

// prepareDir checks that dir is absent or an empty directory and creates the
// layout's subdirectories.
func prepareDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("synth: stat output directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrDirNotEmpty, dir)
	default:
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("synth: read output directory: %w", err)
		}
		if len(ents) > 0 {
			return fmt.Errorf("%w: %s", ErrDirNotEmpty, dir)
		}
	}
	for _, sub := range []string{"fhir", "notes", "reports", "images", PrincipalsDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("synth: create output directory: %w", err)
		}
	}
	return nil
}

// manifestEntry is one line of manifest.jsonl; field order is the contract.
type manifestEntry struct {
	URI         string      `json:"uri"`
	Name        string      `json:"name"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	MimeType    string      `json:"mimeType"`
	Annotations annotations `json:"annotations"`
	Labels      labels      `json:"labels"`
	File        string      `json:"file"`
}

type annotations struct {
	Audience     []string `json:"audience"`
	Priority     float64  `json:"priority"`
	LastModified string   `json:"lastModified"`
}

type labels struct {
	Tenant      string   `json:"tenant"`
	Patient     string   `json:"patient"`
	Type        string   `json:"type"`
	Sensitivity []string `json:"sensitivity,omitempty"`
	Consent     []string `json:"consent,omitempty"`
}

// patientResult is what one worker hands back for one patient.
type patientResult struct {
	id      string
	entries []manifestEntry
	bytes   int64
	err     error
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (g *generator) run(ctx context.Context) (Summary, error) {
	o := g.opts
	sum := Summary{Patients: o.Patients, ByType: map[string]int{}}
	tmpPath := filepath.Join(g.dir, manifestTemp)
	f, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sum, fmt.Errorf("synth: create manifest: %w", err)
	}
	defer f.Close() // second Close after the explicit one is harmless
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)

	edges := map[string]string{}
	careTeam := make([]string, 0, careTeamSize(o.Patients))
	workers := 2 * runtime.GOMAXPROCS(0)
	results := make([]patientResult, batchSize)

	for start := 0; start < o.Patients; start += batchSize {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		n := min(batchSize, o.Patients-start)
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < min(workers, n); w++ {
			wg.Go(func() {
				for {
					j := int(next.Add(1)) - 1
					if j >= n {
						return
					}
					if err := ctx.Err(); err != nil {
						results[j] = patientResult{err: err}
						continue
					}
					results[j] = g.patient(start + j)
				}
			})
		}
		wg.Wait()
		for j := 0; j < n; j++ {
			r := &results[j]
			if r.err != nil {
				return sum, r.err
			}
			if err := ctx.Err(); err != nil {
				return sum, err
			}
			i := start + j
			if i < len(EdgeCases) {
				edges[EdgeCases[i]] = r.id
			}
			if i < cap(careTeam) {
				careTeam = append(careTeam, r.id)
			}
			for k := range r.entries {
				if err := enc.Encode(&r.entries[k]); err != nil {
					return sum, fmt.Errorf("synth: write manifest: %w", err)
				}
				sum.ByType[r.entries[k].Labels.Type]++
			}
			sum.Resources += len(r.entries)
			sum.Bytes += r.bytes
			*r = patientResult{}
			if o.Progress != nil {
				o.Progress(i+1, o.Patients)
			}
		}
	}
	// The payers' Organizations, tenant-level, after every patient (the
	// FHIR copies group the manifest by patient).
	for _, name := range payors {
		e, body := g.payorEntry(name)
		if err := writeNew(filepath.Join(g.dir, e.File), body); err != nil {
			return sum, err
		}
		if err := enc.Encode(&e); err != nil {
			return sum, fmt.Errorf("synth: write manifest: %w", err)
		}
		sum.ByType[e.Labels.Type]++
		sum.Resources++
		sum.Bytes += int64(len(body))
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("synth: write manifest: %w", err)
	}
	if err := f.Sync(); err != nil {
		return sum, fmt.Errorf("synth: sync manifest: %w", err)
	}
	if err := f.Close(); err != nil {
		return sum, fmt.Errorf("synth: close manifest: %w", err)
	}
	sum.Bytes += cw.n

	n, err := g.writePrincipals(careTeam)
	if err != nil {
		return sum, err
	}
	sum.Bytes += n
	n, err = g.writeSummary(sum, edges)
	if err != nil {
		return sum, err
	}
	sum.Bytes += n
	n, err = g.writeFHIR(tmpPath)
	if err != nil {
		return sum, err
	}
	sum.Bytes += n
	if err := os.Rename(tmpPath, filepath.Join(g.dir, ManifestFile)); err != nil {
		return sum, fmt.Errorf("synth: publish manifest: %w", err)
	}
	return sum, nil
}

// summaryFile is the JSON shape of SUMMARY.json.
type summaryFile struct {
	Patients  int               `json:"patients"`
	Resources int               `json:"resources"`
	ByType    map[string]int    `json:"by_type"`
	EdgeCases map[string]string `json:"edge_cases"`
}

func (g *generator) writeSummary(sum Summary, edges map[string]string) (int64, error) {
	b, err := json.MarshalIndent(summaryFile{
		Patients:  sum.Patients,
		Resources: sum.Resources,
		ByType:    sum.ByType,
		EdgeCases: edges,
	}, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("synth: encode summary: %w", err)
	}
	b = append(b, '\n')
	return int64(len(b)), writeNew(filepath.Join(g.dir, SummaryFile), b)
}

// writeNew creates path (which must not exist) with data.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("synth: create file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("synth: write file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("synth: close file: %w", err)
	}
	return nil
}
