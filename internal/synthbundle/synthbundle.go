package synthbundle

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Options choose a Bundle's size.
type Options struct {
	// Bytes is the size to reach: patients are written until the Bundle
	// holds at least this many bytes (it ends with the patient that
	// crosses it). 0 writes one patient.
	Bytes int64
	// Observations per patient; 0 means 60.
	Observations int
}

// Summary is what Write wrote.
type Summary struct {
	Bytes     int64 // the Bundle's size
	Patients  int
	Resources int // entries, every one a resource
}

// uuid is a deterministic UUID-shaped id for the n-th resource of kind k.
func uuid(k byte, n int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8000-%012x", n, k, k, n)
}

// Write writes one transaction Bundle to w.
func Write(w io.Writer, o Options) (Summary, error) {
	obs := o.Observations
	if obs <= 0 {
		obs = 60
	}
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	var sum Summary
	note := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("Patient seen for follow-up; vitals stable, plan unchanged. ", 30)))
	io.WriteString(cw, "{\n  \"resourceType\": \"Bundle\",\n  \"type\": \"transaction\",\n  \"entry\": [")
	n := 0 // resources written, for their ids
	first := true
	entry := func(typ string, id string, r map[string]any) error {
		r["resourceType"], r["id"] = typ, id
		e := map[string]any{"fullUrl": "urn:uuid:" + id, "resource": r, "request": map[string]any{"method": "POST", "url": typ}}
		b, err := json.MarshalIndent(e, "    ", "  ")
		if err != nil {
			return err
		}
		if !first {
			io.WriteString(cw, ",")
		}
		first = false
		io.WriteString(cw, "\n    ")
		cw.Write(b)
		n++
		return cw.err
	}
	for p := 0; p == 0 || cw.n < o.Bytes; p++ {
		pid := uuid(1, p)
		patient := map[string]any{"reference": "urn:uuid:" + pid}
		if err := entry("Patient", pid, map[string]any{
			"identifier": []any{map[string]any{"system": "https://github.com/synthetichealth/synthea", "value": pid}},
			"name":       []any{map[string]any{"family": fmt.Sprintf("Family%d", p), "given": []any{fmt.Sprintf("Given%d", p%997)}}},
			"gender":     []string{"female", "male"}[p%2], "birthDate": fmt.Sprintf("19%02d-%02d-%02d", 30+p%70, 1+p%12, 1+p%28),
			"address": []any{map[string]any{"line": []any{fmt.Sprintf("%d Main Street", p%900)}, "city": "Springfield", "postalCode": "01103"}},
		}); err != nil {
			return sum, err
		}
		var encounters []string
		for e := 0; e < 5; e++ {
			eid := uuid(2, n)
			encounters = append(encounters, eid)
			if err := entry("Encounter", eid, map[string]any{"status": "finished",
				"class":   map[string]any{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"},
				"subject": patient, "period": map[string]any{"start": fmt.Sprintf("2024-%02d-01T09:00:00Z", 1+e), "end": fmt.Sprintf("2024-%02d-01T09:30:00Z", 1+e)},
			}); err != nil {
				return sum, err
			}
		}
		for c := 0; c < 3; c++ {
			if err := entry("Condition", uuid(3, n), map[string]any{"subject": patient,
				"encounter": map[string]any{"reference": "urn:uuid:" + encounters[c]},
				"code":      map[string]any{"coding": []any{map[string]any{"system": "http://snomed.info/sct", "code": "38341003", "display": "Hypertension"}}},
			}); err != nil {
				return sum, err
			}
		}
		for i := 0; i < obs; i++ {
			if err := entry("Observation", uuid(4, n), map[string]any{"status": "final",
				"code":              map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}}},
				"subject":           patient,
				"encounter":         map[string]any{"reference": "urn:uuid:" + encounters[i%5]},
				"effectiveDateTime": fmt.Sprintf("2024-%02d-01T09:%02d:00Z", 1+i%5, i%60),
				"valueQuantity":     map[string]any{"value": 60 + i%40, "unit": "/min", "system": "http://unitsofmeasure.org", "code": "/min"},
			}); err != nil {
				return sum, err
			}
		}
		if err := entry("DocumentReference", uuid(5, n), map[string]any{"status": "current", "subject": patient,
			"context": map[string]any{"encounter": []any{map[string]any{"reference": "urn:uuid:" + encounters[0]}}},
			"content": []any{map[string]any{"attachment": map[string]any{"contentType": "text/plain; charset=utf-8", "data": note}}},
		}); err != nil {
			return sum, err
		}
		sum.Patients++
	}
	io.WriteString(cw, "\n  ]\n}\n")
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	sum.Bytes, sum.Resources = cw.n, n
	return sum, cw.err
}

// countWriter counts what it writes and keeps the first error.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
