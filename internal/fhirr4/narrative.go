package fhirr4

import (
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// xhtmlNS is the namespace of R4 narrative XHTML: the div root and every
// element in it (narrative.html#xhtml).
const xhtmlNS = "http://www.w3.org/1999/xhtml"

// narrativeElements and narrativeAttributes are the elements and attribute
// names R4 allows in a narrative: the lists of the txt-1 invariant of
// Narrative.div (its XPath, in the R4 StructureDefinition of Narrative;
// narrative-definitions.html), letter for letter
// (TestNarrativeListsAreR4s). xml:lang, the language of the narrative
// (narrative.html, resource.html#language), is allowed beside them.
var (
	narrativeElements = setOf("a", "abbr", "acronym", "b", "big", "blockquote", "br", "caption", "cite", "code",
		"col", "colgroup", "dd", "dfn", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
		"li", "ol", "p", "pre", "q", "samp", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot",
		"th", "thead", "tr", "tt", "ul", "var")
	narrativeAttributes = setOf("abbr", "accesskey", "align", "alt", "axis", "bgcolor", "border", "cellhalign",
		"cellpadding", "cellspacing", "cellvalign", "char", "charoff", "charset", "cite", "class", "colspan",
		"compact", "coords", "dir", "frame", "headers", "height", "href", "hreflang", "hspace", "id", "lang",
		"longdesc", "name", "nowrap", "rel", "rev", "rowspan", "rules", "scope", "shape", "span", "src", "start",
		"style", "summary", "tabindex", "title", "type", "valign", "value", "vspace", "width")
)

// activeElements are elements narrative.html names as forbidden ("scripts,
// forms, base/link/xlink, frames, iframes and objects", a head, a body,
// external stylesheets) and their kin: an error names them, since they
// are HTML's and not the resource's. Any other element is "an element".
var activeElements = setOf("script", "style", "iframe", "frame", "frameset", "object", "embed", "applet", "form",
	"input", "button", "select", "textarea", "base", "link", "meta", "head", "body", "html", "svg", "math",
	"template", "noscript", "audio", "video", "source", "portal")

// urlAttributes are the allowed attributes whose value is a URL, where a
// script scheme would run when followed or loaded.
var urlAttributes = setOf("href", "src", "cite", "longdesc")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkNarrative checks s, an xhtml value, as R4 narrative: well-formed
// XML (encoding/xml, strict, knowing HTML's named entities as well as
// XML's, as sources write them, &nbsp;, and the reference validators
// accept them), one div root in the XHTML namespace, only the elements and
// attributes of txt-1 (every element in the XHTML namespace), no script
// URL (javascript:, vbscript:) in a URL attribute, no data URL but an
// img's src of a raster image, no script in a style attribute
// (activeStyle), and some non-whitespace
// text or an img with a src (txt-2). CDATA sections, processing
// instructions and DOCTYPEs are refused too, and a comment holding "<" or
// ">": none carries narrative, and an HTML parser, as a renderer that
// inserts the narrative may use, reads each differently from XML
// (<![CDATA[><img onerror=...>]]> is text to XML and an element to HTML;
// so is the img of <!--><img onerror=...>-->, whose comment HTML closes at
// once). A comment without either ends where both parsers end it, and is
// valid R4. It returns what is wrong, never quoting s, or "".
func checkNarrative(s string) string {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	depth, roots := 0, 0
	content := false
	for {
		off := d.InputOffset()
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line := ""
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				line = " (line " + strconv.Itoa(se.Line) + ")"
			}
			// The parser's message may quote the narrative: not given.
			return "not well-formed XML" + line + ": R4 narrative is XHTML (narrative.html)"
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if roots > 1 {
					return "more than one root element: R4 narrative is one div (narrative.html)"
				}
				if t.Name.Local != "div" || t.Name.Space != xhtmlNS {
					return "the root is not a div in the XHTML namespace: R4 narrative is one (narrative.html)"
				}
			}
			depth++
			if what := narrativeElement(t); what != "" {
				return what
			}
			if t.Name.Local == "img" && hasAttr(t, "src") {
				content = true
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if strings.HasPrefix(s[off:], "<![CDATA[") {
				return "a CDATA section: R4 narrative holds elements and text (an HTML renderer reads CDATA otherwise)"
			}
			if strings.Trim(string(t), " \t\r\n") != "" {
				if depth == 0 {
					return "text outside the div root: R4 narrative is one div (narrative.html)"
				}
				content = true
			}
		case xml.Comment:
			if strings.ContainsAny(string(t), "<>") {
				return "a comment holding markup: an HTML renderer may end it elsewhere and read what follows as elements"
			}
		case xml.ProcInst, xml.Directive:
			return "a processing instruction or DOCTYPE: R4 narrative holds elements and text"
		}
	}
	if roots == 0 {
		return "no div root: R4 narrative is one div in the XHTML namespace (narrative.html)"
	}
	if !content {
		return "no text and no image: R4 narrative has some non-whitespace content (txt-2)"
	}
	return ""
}

// narrativeElement checks one start element of a narrative against txt-1.
func narrativeElement(t xml.StartElement) string {
	if t.Name.Space != xhtmlNS {
		return "an element outside the XHTML namespace: txt-1 allows the basic HTML formatting elements only"
	}
	if !narrativeElements[t.Name.Local] {
		if activeElements[t.Name.Local] {
			return "the element " + t.Name.Local + ": txt-1 allows the basic HTML formatting elements only (no scripts, styles, forms, frames or objects)"
		}
		return "an element txt-1 does not allow: only the basic HTML formatting elements, a and img"
	}
	for _, a := range t.Attr {
		switch {
		case a.Name.Space == "xmlns", a.Name.Space == "" && a.Name.Local == "xmlns":
			// A namespace declaration: what it declares is checked on
			// the elements.
			continue
		case a.Name.Space == "http://www.w3.org/XML/1998/namespace" && a.Name.Local == "lang":
			continue
		case a.Name.Space != "":
			return "an attribute in another namespace on " + t.Name.Local + ": txt-1 allows the basic HTML attributes only (no xlink)"
		case len(a.Name.Local) > 2 && strings.EqualFold(a.Name.Local[:2], "on"):
			return "an event-handler attribute (on...) on " + t.Name.Local + ": R4 narrative has no active content (txt-1)"
		case !narrativeAttributes[a.Name.Local]:
			return "an attribute txt-1 does not allow on " + t.Name.Local + ": only the basic HTML attributes"
		case urlAttributes[a.Name.Local] && scriptURL(a.Value):
			return "a script URL (a javascript or vbscript scheme) in the " + a.Name.Local + " of " + t.Name.Local + ": R4 narrative has no active content"
		case urlAttributes[a.Name.Local] && dataURL(a.Value) && !(t.Name.Local == "img" && a.Name.Local == "src" && imageData(a.Value)):
			return "a data URL in the " + a.Name.Local + " of " + t.Name.Local + ": R4 narrative has no active content (only an img's src may be one, of a raster image type)"
		case a.Name.Local == "style":
			if what := activeStyle(a.Value); what != "" {
				return what + " in the style of " + t.Name.Local + ": txt-1 allows internally contained style attributes, R4 narrative no active content"
			}
		}
	}
	return ""
}

func hasAttr(t xml.StartElement, name string) bool {
	for _, a := range t.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return true
		}
	}
	return false
}

// scriptURL reports whether u names a script scheme as a browser reads it
// (the WHATWG URL parser): leading C0 controls and spaces trimmed, tab
// and newline removed anywhere, the scheme case-insensitive. (Character
// references, &#106;avascript:, are decoded by encoding/xml before; one
// XML does not know, &colon;, makes the narrative not well-formed.)
func scriptURL(u string) bool {
	scheme := urlScheme(u)
	return scheme == "javascript" || scheme == "vbscript"
}

// dataURL reports whether u is a data URL (RFC 2397) as a browser reads
// it (urlScheme).
func dataURL(u string) bool { return urlScheme(u) == "data" }

// urlScheme is the scheme of u as a browser reads it, in lower case, or
// "" when u has none.
func urlScheme(u string) string {
	scheme, _, ok := strings.Cut(browserURL(u), ":")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// browserURL is u as the WHATWG URL parser reads it: leading and trailing
// C0 controls and spaces trimmed, tab and newline removed anywhere.
func browserURL(u string) string {
	u = strings.Trim(u, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	return strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(u)
}

// rasterImages are the image media types a data URL may carry in a
// narrative: raster formats, which a browser decodes as pixels. SVG is
// not one of them: it is a document that can hold scripts, and a browser
// runs them when it opens the image on its own. image/jpg is no registered
// type but the common spelling of image/jpeg (generated HTML writes
// data:image/jpg), whose bytes a browser decodes as the JPEG they are.
var rasterImages = setOf("image/png", "image/apng", "image/jpeg", "image/jpg", "image/gif", "image/webp", "image/avif", "image/bmp")

// imageData reports whether u, a data URL, carries a raster image
// (rasterImages): its media type, before any parameter or the data,
// case-insensitive (the fetch standard's data: URL processor).
func imageData(u string) bool {
	_, rest, _ := strings.Cut(browserURL(u), ":")
	mt, _, _ := strings.Cut(rest, ",")
	mt, _, _ = strings.Cut(mt, ";")
	return rasterImages[strings.ToLower(strings.Trim(mt, " \t\n\f\r"))]
}

// activeStyle says what active content a style attribute holds, as a
// browser reads its CSS (comments dropped, escapes decoded, case and
// white space ignored: cssFold), or "": an IE expression(), a binding
// (-moz-binding, behavior: they load script), a javascript or vbscript
// URL anywhere, or a data URL in url() that is no raster image.
func activeStyle(style string) string {
	css := cssFold(style)
	switch {
	case strings.Contains(css, "expression("):
		return "a CSS expression()"
	case strings.Contains(css, "-moz-binding"), bindingBehavior(css):
		return "a CSS binding (-moz-binding, behavior)"
	case strings.Contains(css, "javascript:"), strings.Contains(css, "vbscript:"):
		return "a script URL (a javascript or vbscript scheme)"
	}
	for rest := css; ; {
		_, after, ok := strings.Cut(rest, "url(")
		if !ok {
			return ""
		}
		target, _, _ := strings.Cut(after, ")")
		target = strings.Trim(target, `"'`)
		if dataURL(target) && !imageData(target) {
			return "a data URL in url() that is no raster image"
		}
		rest = after
	}
}

// bindingBehavior reports whether css (cssFold's) holds IE's behavior
// property (or -ms-behavior), which loads script: a "behavior:" that
// does not end scroll-behavior or overscroll-behavior (CSSOM View's
// scrolling, no binding).
func bindingBehavior(css string) bool {
	for rest := css; ; {
		before, after, ok := strings.Cut(rest, "behavior:")
		if !ok {
			return false
		}
		if !strings.HasSuffix(before, "scroll-") {
			return true
		}
		rest = after
	}
}

// cssFold is CSS text s as a browser's tokenizer reads it, for finding
// functions and schemes in it: comments removed, escapes decoded (a
// backslash and one to six hex digits with one white space after them, a
// backslash and a newline, or a backslash and any other character, CSS
// Syntax 3, 4.3.7), in lower case, without white space or control
// characters (IE read expression (...) and java\nscript: too).
func cssFold(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				i = len(s)
			} else {
				i += 2 + end + 2
			}
		case s[i] == '\\' && i+1 < len(s):
			j := i + 1
			for j < len(s) && j < i+7 && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				r, n := utf8.DecodeRuneInString(s[j:])
				b.WriteRune(r)
				i = j + n
				continue
			}
			if v, err := strconv.ParseUint(s[i+1:j], 16, 32); err == nil && v > 0 && v <= unicode.MaxRune && (v < 0xD800 || v > 0xDFFF) {
				b.WriteRune(rune(v))
			} else {
				b.WriteRune(utf8.RuneError) // CSS: U+FFFD for a null, a surrogate or past U+10FFFF
			}
			if j < len(s) && strings.IndexByte(" \t\n\f\r", s[j]) >= 0 {
				j++
			}
			i = j
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += n
		}
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, b.String())
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
