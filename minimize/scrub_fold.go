package minimize

import (
	"strings"

	"golang.org/x/text/width"
)

// foldForScrub is s folded for the patterns (scrubWith), and whether
// that changed it: to its canonical width if it holds a full-width digit
// or at sign, then by foldNumerals.
func foldForScrub(s string) (string, bool) {
	wide := strings.IndexByte(s, 0xEF) >= 0 && strings.ContainsAny(s, wideMarks) // U+FF00-FFEF begin 0xEF in UTF-8
	if wide {
		s = width.Fold.String(s)
	}
	s, folded := foldNumerals(s)
	return s, wide || folded
}

// wideMarks are the full-width digits and at sign (U+FF10-FF19, U+FF20):
// a string with none of them is scrubbed as it is.
const wideMarks = "０１２３４５６７８９＠"

// kanjiDigits are the kanji numerals 〇 to 九, by value.
var kanjiDigits = map[rune]byte{'〇': '0', '一': '1', '二': '2', '三': '3', '四': '4', '五': '5', '六': '6', '七': '7', '八': '8', '九': '9'}

// foldSeparator is the ASCII character the patterns read for r, a space
// or dash typography puts between a number's groups that no pattern
// names: the en and em spaces (U+2002, U+2003) a space; the hyphen, the
// non-breaking hyphen, the figure dash and the en dash (U+2010-U+2013)
// and the minus sign (U+2212) "-". 0 for any other rune.
func foldSeparator(r rune) byte {
	switch r {
	case '\u2002', '\u2003':
		return ' '
	case '\u2010', '\u2011', '\u2012', '\u2013', '\u2212':
		return '-'
	}
	return 0
}

// foldNumeralDash is the "-" the patterns read for r between two
// numerals (kanji or ASCII digits), a dash that is a word's or a
// sentence's elsewhere: the em dash (U+2014) and the horizontal bar
// (U+2015) of 555—123—4567, the katakana long mark (U+30FC; its
// half-width form U+FF70) that Japanese text puts for a dash,
// 03ー3657ー4418 (コーヒー is a word). 0 for any other rune.
func foldNumeralDash(r rune) byte {
	switch r {
	case '\u2014', '\u2015', '\u30fc', '\uff70':
		return '-'
	}
	return 0
}

// foldNumerals is s with its kanji numerals read as digits where they
// write a number, and foldSeparator's runes as ASCII, and whether it
// differs from s. A kanji numeral is read as a digit only in a chain of
// four numerals or more (kanji or ASCII digits), each joined to the next
// by nothing or by one space, ".", "-", "/", "(" or ")": 〇三‐三六五七‐四四一八
// is 03-3657-4418, but "一般", "第三", "七五三" are words and stay; a
// foldNumeralDash rune between two numerals is "-".
// Strings without a byte of 0xE2 or more (no such rune) are returned as
// they are, at the cost of one scan.
func foldNumerals(s string) (string, bool) {
	i := 0
	for i < len(s) && s[i] < 0xE2 {
		i++
	}
	if i == len(s) {
		return s, false
	}
	rs := []rune(s)
	changed := false
	numeral := func(r rune) bool { _, ok := kanjiDigits[r]; return ok || '0' <= r && r <= '9' }
	for k, r := range rs {
		if c := foldSeparator(r); c != 0 {
			rs[k], changed = rune(c), true
		} else if c := foldNumeralDash(r); c != 0 && k > 0 && k+1 < len(rs) && numeral(rs[k-1]) && numeral(rs[k+1]) {
			rs[k], changed = rune(c), true
		}
	}
	for a := 0; a < len(rs); {
		if !numeral(rs[a]) {
			a++
			continue
		}
		b, n, kanji := a, 0, false
		for b < len(rs) {
			if numeral(rs[b]) {
				_, k := kanjiDigits[rs[b]]
				kanji = kanji || k
				n++
				b++
				continue
			}
			if b+1 < len(rs) && strings.ContainsRune(" .-/()", rs[b]) && numeral(rs[b+1]) {
				b++
				continue
			}
			break
		}
		if kanji && n >= 4 {
			for k := a; k < b; k++ {
				if d, ok := kanjiDigits[rs[k]]; ok {
					rs[k], changed = rune(d), true
				}
			}
		}
		a = b
	}
	if !changed {
		return s, false
	}
	return string(rs), true
}
