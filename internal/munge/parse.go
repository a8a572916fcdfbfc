package munge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Identity is what unmunge reports about a credential.
type Identity struct {
	Status     string // "Success", "Replayed credential", "Expired credential", ...
	StatusCode int    // 0 on success (munge_err_t)
	Host       string // ENCODE_HOST's name
	User       string // UID's name ("" when unmunge printed only the number)
	UID        int
	Group      string
	GID        int
}

// ParseUnmunge reads unmunge's metadata lines ("KEY: value", MUNGE
// 0.5.x), e.g.
//
//	STATUS:          Success (0)
//	ENCODE_HOST:     node1 (10.0.0.5)
//	UID:             alice (1001)
//	GID:             alice (1001)
//
// STATUS, UID and GID are required; unknown keys are ignored (later
// releases add some), a key given twice is an error.
func ParseUnmunge(out []byte) (Identity, error) {
	var id Identity
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			break // the payload follows the blank line
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || !upperKey(key) {
			return Identity{}, fmt.Errorf("line %d %q: want KEY: value", n, line)
		}
		val = strings.TrimSpace(val)
		if seen[key] {
			return Identity{}, fmt.Errorf("line %d: %s given twice", n, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "STATUS":
			id.Status, id.StatusCode, err = nameNumber(val)
		case "ENCODE_HOST":
			id.Host, _, _ = strings.Cut(val, " ")
		case "UID":
			id.User, id.UID, err = nameNumber(val)
		case "GID":
			id.Group, id.GID, err = nameNumber(val)
		}
		if err != nil {
			return Identity{}, fmt.Errorf("line %d: %s: %w", n, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Identity{}, err
	}
	var missing []string
	for _, k := range []string{"STATUS", "UID", "GID"} {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return Identity{}, fmt.Errorf("unmunge's answer has no %s", strings.Join(missing, ", "))
	}
	return id, nil
}

// nameNumber reads "name (N)" or a bare "N" (unmunge --numeric).
func nameNumber(v string) (string, int, error) {
	name, num := "", v
	if i := strings.LastIndex(v, " ("); i >= 0 && strings.HasSuffix(v, ")") {
		name, num = v[:i], v[i+2:len(v)-1]
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("%q: want \"name (number)\" or a number", v)
	}
	if strings.ContainsAny(name, "\x00\n") {
		return "", 0, errors.New("name with a control character")
	}
	return name, n, nil
}

// upperKey: unmunge's keys are upper-case letters and underscores.
func upperKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}
