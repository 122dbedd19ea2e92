package synth

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pngEncoder reuses its compressor state across images (a fresh zlib
// writer costs about a megabyte); the output is the same either way.
var pngEncoder = &png.Encoder{BufferPool: &pngBufferPool{}}

type pngBufferPool struct{ p sync.Pool }

func (p *pngBufferPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}

func (p *pngBufferPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }

// clinicalNote renders a Markdown progress note whose free text repeats the
// patient's identifiers in several formats, as real notes do, so that
// scrubbing and minimization have something to find.
func clinicalNote(p person, visits []visit, diags []diagnosis, obs []obsValue, i int) []byte {
	last := visits[len(visits)-1]
	noun, pron := "woman", "She"
	if p.gender == "male" {
		noun, pron = "man", "He"
	}
	var b strings.Builder
	b.WriteString("# Progress note\n\n")
	fmt.Fprintf(&b, "**Patient:** %s  \n", p.fullName)
	fmt.Fprintf(&b, "**MRN:** %s  \n", p.mrn)
	fmt.Fprintf(&b, "**DOB:** %s  \n", p.birth.Format(dateFmt))
	fmt.Fprintf(&b, "**Visit date:** %s  \n", last.start.Format(dateFmt))
	fmt.Fprintf(&b, "**Attending:** %s\n\n", p.clinician)

	b.WriteString("## Subjective\n\n")
	fmt.Fprintf(&b, "%s is a %d-year-old %s (DOB %s, %s) seen on %s for follow-up of %s.",
		p.fullName, p.age, noun, p.birth.Format("01/02/2006"), p.mrn, last.start.Format("January 2, 2006"), sentenceCase(diags[0].text))
	if len(visits) > 1 {
		fmt.Fprintf(&b, " Previously seen on %s.", visits[0].start.Format("01/02/2006"))
	}
	fmt.Fprintf(&b, " %s reports feeling generally well and is taking medications as prescribed.\n\n", pron)

	b.WriteString("## Objective\n\n")
	for _, o := range obs {
		fmt.Fprintf(&b, "- %s: %s %s (%s)\n", o.test.display, strconv.FormatFloat(o.value, 'f', o.test.decimals, 64), o.test.unit, o.when.Format(dateFmt))
	}
	b.WriteString("\n## Assessment and plan\n\n")
	for k, d := range diags {
		fmt.Fprintf(&b, "%d. %s (%s).", k+1, d.text, d.icd10)
		if k == 0 {
			fmt.Fprintf(&b, " Continue %s; %s.", d.medication, strings.ToLower(d.dosage))
		}
		b.WriteString("\n")
	}
	switch i {
	case edgeHIV:
		b.WriteString("\nHIV viral load remains undetectable on antiretroviral therapy. Discussed partner disclosure and PrEP for partners.\n")
	case edgeSUD:
		b.WriteString("\nPatient is enrolled in the opioid treatment program. This record is protected by 42 CFR Part 2; redisclosure is prohibited without written consent.\n")
	}
	fmt.Fprintf(&b, "\nFollow up in three months, before %s.\n\n", last.start.AddDate(0, 3, 7).Format("January 2, 2006"))

	b.WriteString("## Contact\n\n")
	fmt.Fprintf(&b, "%s prefers to be reached at %s or by e-mail at %s. Home address: %s, %s, %s %s.",
		p.given, p.phone, p.email, p.line, p.place.city, p.place.state, p.zip)
	if i%3 == 0 {
		fmt.Fprintf(&b, " Insurance verification used SSN %s.", p.ssn)
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// sentenceCase lowercases a condition name for use mid-sentence unless it
// starts with an acronym ("HIV infection", "GERD").
func sentenceCase(s string) string {
	if len(s) > 1 && s[1] >= 'A' && s[1] <= 'Z' {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// labReportPDF builds a minimal one-page PDF 1.4 with the patient's
// observation values, with a correct cross-reference table. It ends with
// "%%EOF" and no trailing newline.
func labReportPDF(p person, obs []obsValue, when time.Time) []byte {
	lines := []string{
		"Patient: " + p.fullName + "    MRN: " + p.mrn + "    DOB: " + p.birth.Format(dateFmt),
		"Reported: " + when.Format("2006-01-02 15:04") + " UTC    Ordering clinician: " + p.clinician,
		"",
	}
	for _, o := range obs {
		lines = append(lines, fmt.Sprintf("%s (LOINC %s): %s %s   collected %s",
			o.test.display, o.test.loinc, strconv.FormatFloat(o.value, 'f', o.test.decimals, 64), o.test.unit, o.when.Format(dateFmt)))
	}
	lines = append(lines, "", facilityNm+" laboratory - synthetic data, not a real patient")

	var content bytes.Buffer
	content.WriteString("BT\n/F1 16 Tf\n72 740 Td\n(Laboratory report) Tj\n/F1 10 Tf\n14 TL\nT*\nT*\n")
	for _, l := range lines {
		fmt.Fprintf(&content, "(%s) Tj\nT*\n", pdfEscape(l))
	}
	content.WriteString("ET")

	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", content.Len(), content.Bytes()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for k, o := range objs {
		offsets[k] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", k+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF", len(objs)+1, xref)
	return b.Bytes()
}

// pdfEscape escapes a PDF literal string; input is ASCII by construction.
func pdfEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	return r.Replace(s)
}

// diagnosticPNG renders a deterministic 32x32 grayscale "scan": a radial
// gradient with noise drawn from r. Integer arithmetic only.
func diagnosticPNG(r *rand.Rand) []byte {
	const size = 32
	img := image.NewGray(image.Rect(0, 0, size, size))
	cx, cy := 12+r.IntN(8), 12+r.IntN(8)
	for y := 0; y < size; y++ {
		for x := 0; x < size; x++ {
			d := (x-cx)*(x-cx) + (y-cy)*(y-cy)
			v := 220 - d/2 + r.IntN(24)
			img.SetGray(x, y, color.Gray{Y: uint8(max(0, min(255, v)))})
		}
	}
	var b bytes.Buffer
	if err := pngEncoder.Encode(&b, img); err != nil { // writing to memory cannot fail
		panic(err)
	}
	return b.Bytes()
}
