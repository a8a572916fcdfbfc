package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The JSON shapes Slurm's tools write, shared by the job and node parsers.
// Each is decoded by one type here, whatever the release:
//
//	number       22.05: 10 or null            23.02+: {"set":true,"infinite":false,"number":10}
//	state        22.05: "PENDING" / "idle"    23.02+ (nodes) / 23.11+ (jobs): ["RUNNING","CONFIGURING"]
//	list         22.05: "a10g,g5.xlarge"      23.02+: ["a10g","g5.xlarge"]
//	meta         22.05: {"plugin":{"type":"openapi/v0.0.38"},"Slurm":{"release":"22.05.8"}}
//	             23.02+: {"plugin":{"data_parser":"data_parser/v0.0.42"},"slurm":{"release":"24.11.5"}}

// MaxJSONSize caps the Slurm JSON handed to the parsers (24.11 writes about
// 7.5 KB per job: 512 MiB is some 70,000 jobs).
const MaxJSONSize = 512 << 20

// num is a number in any of Slurm's JSON forms.
type num struct {
	set, inf bool
	n        string // the JSON number literal, when set and finite
}

var numType = reflect.TypeOf(num{})

func (v *num) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*v = num{}
	switch {
	case len(b) == 0:
		return &json.UnmarshalTypeError{Value: "nothing", Type: numType}
	case string(b) == "null":
		return nil
	case b[0] == '{':
		var o struct {
			Set      *bool           `json:"set"`
			Infinite *bool           `json:"infinite"`
			Number   json.RawMessage `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return &json.UnmarshalTypeError{Value: "object with a malformed set/infinite/number", Type: numType}
		}
		if o.Infinite != nil && *o.Infinite {
			v.set, v.inf = true, true
			return nil
		}
		if o.Set != nil && !*o.Set || len(o.Number) == 0 || string(o.Number) == "null" {
			return nil // unset
		}
		if !isNumberLiteral(o.Number) {
			return &json.UnmarshalTypeError{Value: "object whose number is not a number", Type: numType}
		}
		v.set, v.n = true, string(o.Number)
		return nil
	case isNumberLiteral(b):
		v.set, v.n = true, string(b)
		return nil
	}
	what := map[byte]string{'"': "string", '[': "array", 't': "bool", 'f': "bool"}[b[0]]
	if what == "" {
		what = "value"
	}
	return &json.UnmarshalTypeError{Value: what, Type: numType}
}

func isNumberLiteral(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') && json.Valid(b)
}

// conv converts parsed numbers for one record, keeping the first error,
// which names the record and the field.
type conv struct {
	where string
	err   error
}

func (c *conv) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s: %s", c.where, field, fmt.Sprintf(format, args...))
	}
}

// uint reads a whole number in [0, max]; unset and infinite give 0.
func (c *conv) uint(field string, v num, max uint64) uint64 {
	if !v.set || v.inf || c.err != nil {
		return 0
	}
	if strings.HasPrefix(v.n, "-") {
		c.fail(field, "%s is negative", v.n)
		return 0
	}
	n, err := strconv.ParseUint(v.n, 10, 64)
	if err != nil {
		c.fail(field, "%s is not a whole number", v.n)
		return 0
	}
	if n > max {
		c.fail(field, "%s is out of range (at most %d)", v.n, max)
		return 0
	}
	return n
}

func (c *conv) u32(field string, v num) uint32 { return uint32(c.uint(field, v, math.MaxUint32)) }

// minutes reads a time limit in minutes. 22.05 writes NO_VAL/INFINITE as
// 4294967294/4294967295 where 23.02+ writes set:false/infinite:true: both
// give 0 (not set, or unlimited).
func (c *conv) minutes(field string, v num) time.Duration {
	n := c.uint(field, v, math.MaxUint32)
	if n >= math.MaxUint32-1 {
		return 0
	}
	return time.Duration(n) * time.Minute
}

// unix reads seconds since the epoch; 0, unset and infinite give the zero time.
func (c *conv) unix(field string, v num) time.Time {
	n := c.uint(field, v, 1<<40)
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(int64(n), 0)
}

// strList is a list of strings: a JSON array, one string (22.05's
// job_state "PENDING" becomes ["PENDING"]), a comma-separated string
// (22.05's features "a,b") when split is used, or null.
type strList []string

var strListType = reflect.TypeOf(strList{})

func (l *strList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*l = nil
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != "" {
			*l = strList{s}
		}
		return nil
	case len(b) > 0 && b[0] == '[':
		var a []string
		if err := json.Unmarshal(b, &a); err != nil {
			return &json.UnmarshalTypeError{Value: "array of non-strings", Type: strListType}
		}
		*l = a
		return nil
	}
	return &json.UnmarshalTypeError{Value: "number or object", Type: strListType}
}

// split returns the list with comma-separated items split (22.05 writes
// features as "a,b", 23.02+ as ["a","b"]); "(null)" and "" are dropped.
func (l strList) split() []string {
	var out []string
	for _, s := range l {
		for _, p := range strings.Split(s, ",") {
			if p != "" && p != "(null)" {
				out = append(out, p)
			}
		}
	}
	return out
}

// rawMeta is the "meta" object of every answer; encoding/json matches keys
// without regard to case, so 22.05's "Slurm" fills Slurm too.
type rawMeta struct {
	Plugin struct {
		Type       string `json:"type"`        // 22.05: "openapi/v0.0.38"
		DataParser string `json:"data_parser"` // 23.02+: "data_parser/v0.0.42"
	} `json:"plugin"`
	Slurm struct {
		Release string `json:"release"`
	} `json:"slurm"`
}

// String names the release and format, for error messages:
// "Slurm 24.11.5, data_parser/v0.0.42".
func (m rawMeta) String() string {
	var parts []string
	if m.Slurm.Release != "" {
		parts = append(parts, "Slurm "+m.Slurm.Release)
	}
	switch {
	case m.Plugin.DataParser != "":
		parts = append(parts, m.Plugin.DataParser)
	case m.Plugin.Type != "":
		parts = append(parts, m.Plugin.Type)
	}
	if len(parts) == 0 {
		return "no meta"
	}
	return strings.Join(parts, ", ")
}

type rawError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
	Source      string `json:"source"`
}

// doc is what every answer has besides its records.
type doc struct {
	Meta   rawMeta    `json:"meta"`
	Errors []rawError `json:"errors"`
}

// decodeDoc decodes b (one JSON object, at most MaxJSONSize) into v.
func decodeDoc(what string, b []byte, v any) error {
	if len(b) > MaxJSONSize {
		return fmt.Errorf("parsing %s: %d bytes, more than the %d allowed", what, len(b), MaxJSONSize)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("parsing %s: not a JSON object (first bytes %.40q)", what, t)
	}
	if err := json.Unmarshal(t, v); err != nil {
		return fmt.Errorf("parsing %s: %w", what, describeJSONError(err))
	}
	return nil
}

func docErrors(what string, m rawMeta, errs []rawError) error {
	if len(errs) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, strings.TrimSpace(fmt.Sprintf("%s %s (%d, %s)", e.Error, e.Description, e.ErrorNumber, e.Source)))
	}
	return fmt.Errorf("%s (%s) reported errors: %s", what, m, strings.Join(msgs, "; "))
}

// describeJSONError makes encoding/json errors say which field was wrong
// and what burst expected there.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		want := te.Type.String()
		switch te.Type {
		case numType:
			want = `a number, null or {"set":..,"infinite":..,"number":..}`
		case strListType:
			want = "a string or an array of strings"
		}
		return fmt.Errorf("field %q: got JSON %s, want %s", field, te.Value, want)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	}
	return err
}
