// Package uitest checks what a dashboard page shows against the JSON of
// the matching read-only API view, for tests (the unit tests read the HTML,
// the browser test reads the DOM through WebDriver).
//
// The contract (package ui): an element's data-k attribute is a path into
// the view's JSON, segments separated by "/", array elements by index
// ("accounts/0/spent_usd"). Its text is the value as the page writes it:
// numbers possibly with "$", "%" and thousands separators, rounded to the
// decimals shown; strings as they are; times in a datetime attribute.
package uitest

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Figure is one marked element as the page shows it.
type Figure struct {
	Key      string // data-k
	Text     string // textContent
	DateTime string // datetime attribute ("" when none)
}

// Compare checks every figure against the view's JSON and returns the
// mismatches (empty when all agree).
func Compare(view []byte, figs []Figure) []string {
	var root any
	dec := json.NewDecoder(strings.NewReader(string(view)))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return []string{"decoding the API view: " + err.Error()}
	}
	var bad []string
	for _, f := range figs {
		v, err := Resolve(root, f.Key)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: shown %q, but %v", f.Key, f.Text, err))
			continue
		}
		if msg := match(v, f); msg != "" {
			bad = append(bad, f.Key+": "+msg)
		}
	}
	return bad
}

// Resolve follows a data-k path in decoded JSON (json.Number numbers).
func Resolve(root any, path string) (any, error) {
	cur := root
	for _, seg := range strings.Split(path, "/") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, fmt.Errorf("the API has no %q at %s", seg, path)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("the API's list has %d elements, not an element %q (%s)", len(c), seg, path)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("the API has a %T before %q (%s)", cur, seg, path)
		}
	}
	return cur, nil
}

var numText = regexp.MustCompile(`^-?\$?-?[0-9][0-9,]*(\.[0-9]+)?%?$`)

func match(v any, f Figure) string {
	text := strings.TrimSpace(f.Text)
	switch x := v.(type) {
	case json.Number:
		want, err := x.Float64()
		if err != nil {
			return "the API's number " + x.String() + " does not parse"
		}
		if !numText.MatchString(text) {
			return fmt.Sprintf("shown %q is not a number; the API says %s", text, x)
		}
		clean := strings.NewReplacer("$", "", ",", "", "%", "").Replace(text)
		got, err := strconv.ParseFloat(clean, 64)
		if err != nil {
			return fmt.Sprintf("shown %q does not parse: %v", text, err)
		}
		dec := 0
		if i := strings.IndexByte(clean, '.'); i >= 0 {
			dec = len(clean) - i - 1
		}
		// the text must be a rounding of the API's value to the decimals shown
		if math.Abs(want-got) > 0.5*math.Pow(10, -float64(dec))*(1+1e-9)+1e-12*math.Abs(want) {
			return fmt.Sprintf("shown %s, the API says %s (%.*f at the %d decimals shown)", text, x, dec, want, dec)
		}
	case string:
		if f.DateTime != "" {
			a, err1 := time.Parse(time.RFC3339Nano, f.DateTime)
			b, err2 := time.Parse(time.RFC3339Nano, x)
			if err1 != nil || err2 != nil || !a.Equal(b) {
				return fmt.Sprintf("shown time %s, the API says %s", f.DateTime, x)
			}
			return ""
		}
		if text != x {
			return fmt.Sprintf("shown %q, the API says %q", text, x)
		}
	case bool:
		if text != map[bool]string{true: "yes", false: "no"}[x] {
			return fmt.Sprintf("shown %q, the API says %v", text, x)
		}
	default:
		return fmt.Sprintf("shown %q, the API has %T %v there (not a single figure)", text, v, v)
	}
	return ""
}

// Count is how many figures have a key matching re.
func Count(figs []Figure, re string) int {
	r := regexp.MustCompile(re)
	n := 0
	for _, f := range figs {
		if r.MatchString(f.Key) {
			n++
		}
	}
	return n
}

var figRe = regexp.MustCompile(`<(\w+)\b([^>]*)\bdata-k="([^"]*)"([^>]*)>([^<]*)<`)
var dtRe = regexp.MustCompile(`\bdatetime="([^"]*)"`)

// FromHTML extracts the figures of a page the ui package wrote (its
// data-k elements hold text only). Browser tests read the DOM instead.
func FromHTML(page string) []Figure {
	var out []Figure
	for _, m := range figRe.FindAllStringSubmatch(page, -1) {
		f := Figure{Key: unescape(m[3]), Text: unescape(m[5])}
		if d := dtRe.FindStringSubmatch(m[2] + m[4]); d != nil {
			f.DateTime = unescape(d[1])
		}
		out = append(out, f)
	}
	return out
}

func unescape(s string) string { return html.UnescapeString(s) }
