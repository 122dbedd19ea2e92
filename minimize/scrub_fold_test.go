package minimize

import "testing"

// checkScrub fails t where ScrubString of a case's in is not its want, or
// where its output is no fixpoint.
func checkScrub(t *testing.T, cases []scrubCase) {
	t.Helper()
	for _, c := range cases {
		got := ScrubString(c.in)
		if got != c.want {
			t.Errorf("ScrubString(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := ScrubString(got); again != got {
			t.Errorf("ScrubString(%q) is no fixpoint: %q", got, again)
		}
	}
}

// checkKept fails t where ScrubString changes one of ss.
func checkKept(t *testing.T, ss []string) {
	t.Helper()
	for _, s := range ss {
		if got := ScrubString(s); got != s {
			t.Errorf("ScrubString(%q) = %q, want it unchanged", s, got)
		}
	}
}

// TestScrubFoldedNumerals: telephone numbers written in kanji numerals, or
// with their groups joined by en or em spaces (U+2002, U+2003), a hyphen
// (U+2010), a non-breaking hyphen (U+2011), a figure dash (U+2012) or an
// en dash (U+2013), were released whole until h-scrub4: no pattern read
// them. Kanji numerals that are words, and text with such dashes but no
// identifier, come out as they were.
func TestScrubFoldedNumerals(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"電話 〇三‐三六五七‐四四一八", "電話 [PHONE]"},
		{"国民健康保険 鷹司紫苑 〇三‐三六五七‐四四一八", "国民健康保険 鷹司紫苑 [PHONE]"},
		{"携帯 〇九〇‐一二三四‐五六七八", "携帯 [PHONE]"},
		{"tel 555\u2002123\u20024567", "tel [PHONE]"},
		{"tel 555\u2003123\u20034567", "tel [PHONE]"},
		{"tel 555\u2011123\u20114567", "tel [PHONE]"},
		{"tel 555\u2012123\u20124567", "tel [PHONE]"},
		{"tel 555\u2013123\u20134567", "tel [PHONE]"},
		{"020\u20027946\u20020958", "[PHONE]"},
		{"03\u20111234\u20115678", "[PHONE]"},
		{"SSN 123\u201345\u20136789", "SSN [SSN]"},
		{"DOB 1931\u201303\u201314", "DOB [DATE]"},
		// Folded text comes out when something was replaced: the en dash
		// of a range is then "-".
		{"5\u201310 mg, call 555\u2013123\u20134567", "5-10 mg, call [PHONE]"},
	})
	checkKept(t, []string{
		"第三病棟 一般病床 七五三 四六時中",
		"二〇二四年度",
		"5\u201310 mg",
		"BP 120\u201380",
		"Smith\u2013Jones, em\u2003space",
		"八一歳",
	})
}

// TestScrubBSNInGroups: a BSN written in groups, 3-3-3 or 4-2-3 with
// spaces, was released until h-scrub4 (only 111222333 and 1112.22.333
// were read). It is replaced when it passes the 11-proef, as before;
// 271 836 451 and 2718.36.451 do not (9·2 + 8·7 + … + 2·5 − 1 = 189, no
// multiple of 11) and are kept, as any nine digits are that fail it.
func TestScrubBSNInGroups(t *testing.T) {
	checkScrubSpaced(t, []scrubCase{
		{"BSN 111 222 333", "BSN [ID]"},
		{"BSN: 123 456 782.", "BSN: [ID]."},
		{"1112 22 333", "[ID]"},
		{"111.222.333", "[ID]"},
	})
	checkKept(t, []string{"BSN 271 836 451", "2718.36.451", "111 222 334", "10 000 /µL", "250 000 000 /L"})
}

// foldNumeralsPlain is foldNumerals' reference: a kanji numeral is read
// as a digit where its maximal run of numerals, digits and single
// separators between them holds four numerals or more, a kanji numeral
// among them; the separators of foldSeparator are folded everywhere.
func foldNumeralsPlain(s string) string {
	isNum := func(r rune) bool { _, ok := kanjiDigits[r]; return ok || '0' <= r && r <= '9' }
	in := []rune(s)
	var b []rune
	for k, r := range in {
		if c := foldSeparator(r); c != 0 {
			r = rune(c)
		}
		if c := foldNumeralDash(r); c != 0 && k > 0 && k < len(in)-1 && isNum(in[k-1]) && isNum(in[k+1]) {
			r = rune(c)
		}
		b = append(b, r)
	}
	out := append([]rune(nil), b...)
	for a := 0; a < len(b); a++ {
		if !isNum(b[a]) || a > 0 && (isNum(b[a-1]) || a > 1 && isNum(b[a-2]) && isChainSep(b[a-1])) {
			continue // not the start of a run
		}
		e, n, kanji := a, 0, false
		for e < len(b) && (isNum(b[e]) || isChainSep(b[e]) && e+1 < len(b) && isNum(b[e+1]) && e > a) {
			if isNum(b[e]) {
				n++
				_, k := kanjiDigits[b[e]]
				kanji = kanji || k
			}
			e++
		}
		if kanji && n >= 4 {
			for k := a; k < e; k++ {
				if d, ok := kanjiDigits[b[k]]; ok {
					out[k] = rune(d)
				}
			}
		}
	}
	return string(out)
}

func isChainSep(r rune) bool {
	return r == ' ' || r == '.' || r == '-' || r == '/' || r == '(' || r == ')'
}

// TestFoldNumeralsAgrees: foldNumerals agrees with foldNumeralsPlain.
func TestFoldNumeralsAgrees(t *testing.T) {
	for _, s := range []string{
		"電話 〇三‐三六五七‐四四一八", "〇三 三六五七", "一二三", "一二三四", "第一二三四病棟", "(〇三)三六五七-四四一八", "1二3四",
		"七五三 四六時中", "二〇二四年", "a\u2002b\u2013c", "", "一", "--一二三四--", "一-二-三-四", "一--二三四五",
		"〇三ー三六五七ー四四一八", "03ー3657ー4418", "555—123—4567", "コーヒー", "ー1ー", "1ーー2", "一ー二ー三ー四", "5\u2015一",
	} {
		checkFoldNumerals(t, s)
	}
}

func checkFoldNumerals(t *testing.T, s string) {
	t.Helper()
	// The plain version reads s rune by rune, an invalid byte as U+FFFD;
	// foldNumerals returns s itself where it folds nothing.
	got, changed := foldNumerals(s)
	want, folds := foldNumeralsPlain(s), foldNumeralsPlain(s) != string([]rune(s))
	if !folds {
		want = s
	}
	if got != want || changed != folds {
		t.Errorf("foldNumerals(%q) = %q, %v; the plain version %q, %v", s, got, changed, want, folds)
	}
}

func FuzzFoldNumerals(f *testing.F) {
	f.Add("電話 〇三‐三六五七‐四四一八")
	f.Add("一-二-三-四 5\u20136")
	f.Add("〇三ー三六五七ー四四一八 555—123—4567 コーヒー")
	f.Fuzz(func(t *testing.T, s string) {
		checkFoldNumerals(t, s)
	})
}
