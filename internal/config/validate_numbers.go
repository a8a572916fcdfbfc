package config

import (
	"fmt"
	"math"
	"net"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// finite reports every float in the configuration that is not a number
// or infinite (YAML's .nan and .inf): a cap of NaN compares false with
// every spend and would silently disappear.
func (v *validator) finite(x reflect.Value, path string) {
	switch x.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := x.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			v.add(path, "%v is not a finite number; give a plain number like 100 or 0.5", f)
		}
	case reflect.Struct:
		t := x.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !f.IsExported() || tag == "-" || tag == "" {
				continue
			}
			v.finite(x.Field(i), strings.TrimPrefix(path+"."+tag, "."))
		}
	case reflect.Slice:
		for i := 0; i < x.Len(); i++ {
			v.finite(x.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		for _, k := range x.MapKeys() {
			v.finite(x.MapIndex(k), fmt.Sprintf("%s.%v", path, k.Interface()))
		}
	case reflect.Pointer:
		if !x.IsNil() {
			v.finite(x.Elem(), path)
		}
	}
}

// hostPort checks a listen address or a URL's host: host:port with a
// port from 1 to 65535 (0, any free port, where listen allows it).
func (v *validator) hostPort(path, hp string, listen bool) {
	_, port, err := net.SplitHostPort(hp)
	if err != nil {
		v.add(path, "%q is not host:port", hp)
		return
	}
	low := 1
	if listen {
		low = 0
	}
	if n, err := strconv.Atoi(port); err != nil || n < low || n > 65535 {
		v.add(path, "%q: port %q is not a number from %d to 65535", hp, port, low)
	}
}

// awsID is the shape of an EC2 resource id: the prefix, a dash, then
// lower-case letters or digits (EC2's own are 8 or 17 hexadecimal digits;
// the tests' emulator takes short ones like subnet-1).
var awsID = regexp.MustCompile(`^[a-z]+-[0-9a-z]{1,32}$`)

func (v *validator) resourceID(path, id, prefix, what string) {
	if !strings.HasPrefix(id, prefix+"-") || !awsID.MatchString(id) {
		v.add(path, "%q is not %s ID: want %s- then lower-case hexadecimal digits, e.g. %s-0123456789abcdef0", id, what, prefix, prefix)
	}
}
