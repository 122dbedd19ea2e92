package minimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// parseObligationSpec turns fuzz input into obligations: one per line,
// "op|path|fn". At most 8 are kept so a single input stays cheap.
func parseObligationSpec(spec string) []Obligation {
	var obs []Obligation
	for _, line := range strings.Split(spec, "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		obs = append(obs, Obligation{Op: parts[0], Path: parts[1], Fn: parts[2]})
		if len(obs) == 8 {
			break
		}
	}
	return obs
}

// idempotentSet reports whether applying obs twice must equal applying them
// once: only remove, mask, scrub and allow, and no remove addressing an array
// element by index (removing /a/0 twice removes two elements).
func idempotentSet(obs []Obligation) bool {
	for _, o := range obs {
		switch o.Op {
		case OpMask, OpScrub, OpAllow:
		case OpRemove:
			segs, _ := parsePointer(o.Path)
			for _, s := range segs {
				if _, ok := arrayIndex(s, 1<<30); ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// scrubsAll reports whether obs contains a whole-document scrub of SSNs and
// emails.
func scrubsAll(obs []Obligation) bool {
	for _, o := range obs {
		if o.Op != OpScrub || o.Path != "" {
			continue
		}
		if c, err := parseScrubFn(o.Fn); err == nil && c&(classSSN|classEmail) == classSSN|classEmail {
			return true
		}
	}
	return false
}

func patternFor(class scrubClasses) *scrubPattern {
	for i := range scrubPatterns {
		if scrubPatterns[i].class == class {
			return &scrubPatterns[i]
		}
	}
	panic("no pattern")
}

// stringValues calls f for every string value (not member name) in v.
func stringValues(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, c := range x {
			stringValues(c, f)
		}
	case []any:
		for _, c := range x {
			stringValues(c, f)
		}
	}
}

func FuzzJSON(f *testing.F) {
	f.Add([]byte(patientJSON), "remove|/name|\ngeneralize|/birthDate|birthyear90\nscrub||")
	f.Add([]byte(opsDoc), "remove|/telecom/*/value|\nmask|/arr/1|last4")
	f.Fuzz(func(t *testing.T, doc []byte, spec string) {
		obs := parseObligationSpec(spec)
		opts := Options{Now: refNow}
		out, err := JSON(doc, obs, opts)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v returned with output %q", err, out)
			}
			if !errors.Is(err, ErrMalformed) && ValidateAll(obs) == nil {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		// The encoding is canonical: re-encoding the output is a no-op.
		again, err := JSON(out, nil, opts)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("output not canonical:\n%q\n%q (%v)", out, again, err)
		}
		if idempotentSet(obs) {
			twice, err := JSON(out, obs, opts)
			if err != nil || !bytes.Equal(twice, out) {
				t.Fatalf("not idempotent:\nonce  %q\ntwice %q (%v)", out, twice, err)
			}
		}
		if scrubsAll(obs) {
			dec := json.NewDecoder(bytes.NewReader(out))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			ssn, email := patternFor(classSSN), patternFor(classEmail)
			stringValues(v, func(s string) {
				if ssn.re.MatchString(s) || email.re.MatchString(s) {
					t.Fatalf("scrubbed value still holds an SSN or email: %q", s)
				}
			})
		}
	})
}

func FuzzText(f *testing.F) {
	f.Add(clinicalNote, "")
	f.Add("SSN 123-45-6789 / 555-123-4567", "ssn,phone")
	f.Add("電話 ０３－１２３４－５６７８ ＭＲＮ １２３４５６７ 第２病棟", "")
	f.Add("ｔａｒｏ＠ｅｘａｍｐｌｅ．ｊｐ 555-123-4567", "email")
	f.Add("電話 〇三‐三六五七‐四四一八, 5\u201310 mg, tel 555\u2002123\u20024567, BSN 111 222 333", "")
	f.Add("see https://portal.example.org/p/12345 from 10.0.0.7:8080 or 2001:db8::1, www.janedoe.com", "url")
	f.Add("Acct# 12345678, VIN 1G4AH59H45G118341, plate ABC 1234, SN: X1234567, (01)00844588003288(21)AB12", "id")
	f.Add("DNI 54362315-K, codice fiscale RSSMRA85T10A562S, BSN 111 222 333, Versichertennummer: 1234567890", "")
	f.Add("MSH|^~\\&|ADT|SMH|||20261207||ADT^A01|MSG00417|P|2.5.1\rPID|1||58203391^^^SMH^MR||DOE^JANE^Q||19490217|F|||12 Main St^^Springfield^MA^01101||(715)555-0162^PRN^PH^^^715^5550162|||||7730019452^^^SMH^AN|531-86-2047\rOBX|1|NM|8867-4^Heart rate^LN||72|/min", "")
	f.Add("PID|||||DOE^JANE^Q PV1|1|I||||||||||||||||V00488213^^^SMH^VN NK1|1|DOE^JOHN|SPO||^PRN^PH^^^715^5550177", "mrn,phone")
	f.Add("MRG|58203391^^^SMH^MR||7730019452|||V00488213|DOE^JANE\nZNK|1|DOE^JOHN||^PRN^PH^^^715^5550177", "")
	f.Add("URN:CERNER:IDENTITY-FEDERATION:REALM:NESSELRODE710948, j dot nesselrode at example dot com, j.nesselrode [at] example [dot] com", "url,email")
	f.Add("昭和23年2月29日生, 1948年2月29日, 1948년 2월 29일, 03ー3657ー4418, 555—123—4567, 3日間, コーヒー", "date,phone")
	f.Add("MRN: E4417206, EPI E4417206, FIN-00551207, CSN 81773920145, Visit V00488213, case no. 2024-55120; Visit 2, case 3 of 5", "mrn")
	f.Fuzz(func(t *testing.T, text, fn string) {
		obs := []Obligation{{Op: OpScrub, Fn: fn}}
		out, err := Text([]byte(text), obs, Options{})
		classes, perr := parseScrubFn(fn)
		if perr != nil {
			if !errors.Is(err, ErrBadFn) || out != nil {
				t.Fatalf("fn %q: got %q, %v; want nil, ErrBadFn", fn, out, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Text: %v", err)
		}
		for _, p := range scrubPatterns {
			if classes&p.class != 0 && p.replace(string(out), false) != string(out) {
				t.Fatalf("%s pattern still finds an identifier in %q", p.token, out)
			}
		}
		if scrubHL7Segments(string(out), classes) != string(out) {
			t.Fatalf("an HL7 v2 segment still holds an identifying field in %q", out)
		}
		twice, err := Text(out, obs, Options{})
		if err != nil || !bytes.Equal(twice, out) {
			t.Fatalf("not idempotent:\nonce  %q\ntwice %q", out, twice)
		}
		if classes == allClasses && ScrubString(text) != string(out) {
			t.Fatalf("ScrubString disagrees with Text scrub")
		}
	})
}

// FuzzScrubReason: ScrubReason's output is a fixpoint in which no pattern
// matches outside machine tokens, and it differs from ScrubString's only
// when s holds a machine token (ScrubString's own properties: FuzzText).
func FuzzScrubReason(f *testing.F) {
	f.Add(clinicalNote)
	f.Add("(candidate sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef) 555-123-4567")
	f.Add("aaaaaaaa-2024-0305-1234-5551234567ab 5551234567abcdef5551234567abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		out := ScrubReason(s)
		for _, p := range scrubPatterns {
			if p.replace(out, true) != out {
				t.Fatalf("%s pattern still matches outside machine tokens in %q", p.token, out)
			}
		}
		if twice := ScrubReason(out); twice != out {
			t.Fatalf("not idempotent:\nonce  %q\ntwice %q", out, twice)
		}
		if machineTokens(s) == nil && out != ScrubString(s) {
			t.Fatalf("no machine token in %q, yet ScrubReason %q and ScrubString %q differ", s, out, ScrubString(s))
		}
	})
}

func FuzzValidate(f *testing.F) {
	f.Add("remove", "/name", "")
	f.Add("generalize", "/address/*/postalCode", "zip3")
	f.Fuzz(func(t *testing.T, op, path, fn string) {
		o := Obligation{Op: op, Path: path, Fn: fn}
		err := o.Validate()
		if err != nil {
			if !errors.Is(err, ErrUnknownOp) && !errors.Is(err, ErrBadPath) && !errors.Is(err, ErrBadFn) {
				t.Fatalf("Validate error of unknown class: %v", err)
			}
			// Invalid obligations are refused by every entry point.
			for _, mt := range []string{"application/json", "text/plain", "image/png"} {
				if out, aerr := Apply(mt, []byte(`{}`), []Obligation{o}, Options{Now: refNow}); aerr == nil || out != nil {
					t.Fatalf("Apply(%s) accepted invalid %s", mt, o)
				}
			}
			return
		}
		if !strings.HasPrefix(o.String(), op+":"+path) {
			t.Fatalf("String() = %q", o.String())
		}
		if _, err := JSON([]byte(`{"a":[{"b":"555-123-4567"}],"c":"1934-05-01"}`), []Obligation{o}, Options{Now: refNow}); err != nil {
			t.Fatalf("valid obligation %s failed on JSON: %v", o, err)
		}
		_, terr := Text([]byte("x"), []Obligation{o}, Options{})
		if wantOK := op == OpScrub && path == ""; wantOK != (terr == nil) {
			t.Fatalf("Text with %s: %v", o, terr)
		}
		if _, err := Apply("image/png", []byte("x"), []Obligation{o}, Options{}); !errors.Is(err, ErrBinaryWithheld) {
			t.Fatalf("binary with %s: %v", o, err)
		}
	})
}

// FuzzScrubKeeping: ScrubKeeping keeps every occurrence of its kept string
// (it came through the scrub whole), leaves no identifier in the text
// between them, and is ScrubString when nothing is kept.
func FuzzScrubKeeping(f *testing.F) {
	const digest = "sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef"
	f.Add("compile failed: \"aaaaaaaa-2024-0305-1234-5551234567ab\" (candidate "+digest+")", digest)
	f.Add("call 555-123-4567 "+digest+digest+" 5551234567", digest)
	f.Add(clinicalNote, "")
	f.Fuzz(func(t *testing.T, s, keep string) {
		out := ScrubKeeping(s, keep)
		if keep == "" {
			if out != ScrubString(s) {
				t.Fatalf("nothing kept, yet ScrubKeeping %q and ScrubString %q differ", out, ScrubString(s))
			}
			return
		}
		if strings.Count(out, keep) < strings.Count(s, keep) {
			t.Fatalf("%q: %d of %q kept, want %d", out, strings.Count(out, keep), keep, strings.Count(s, keep))
		}
		for _, piece := range strings.Split(out, keep) {
			if ScrubString(piece) != piece {
				t.Fatalf("%q left between the kept strings of %q scrubs to %q", piece, out, ScrubString(piece))
			}
		}
	})
}

// FuzzScrubPrefilters: a pattern's prefilter (scrubPattern.may) is false
// only where its plain regexp finds nothing, so that scrubbing with and
// without it agree (TestScrubPrefiltersAgree has the table).
func FuzzScrubPrefilters(f *testing.F) {
	for _, s := range concat(prefilterCases, safeHarborPrefilterCases, ehrPrefilterCases) {
		f.Add(s)
	}
	f.Add(clinicalNote)
	f.Fuzz(func(t *testing.T, s string) {
		checkPrefilters(t, s)
	})
}
