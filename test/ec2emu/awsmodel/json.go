package awsmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// jsonResponse checks an awsJson1_0 response: the output structure as a
// JSON object keyed by member name (or locationName).
func (c *checker) jsonResponse(output string, body []byte) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		c.add("", "not JSON: %v", err)
		return
	}
	if output == "" {
		if obj, ok := v.(map[string]any); !ok || len(obj) > 0 {
			c.add("", "the operation has no output, but the response is %s", clip(string(body)))
		}
		return
	}
	sh := c.shape(output, output)
	if sh == nil {
		return
	}
	c.jsonValue(output, sh, v)
}

func (c *checker) jsonValue(path string, sh *Shape, v any) {
	if v == nil {
		c.add(path, "null (AWS leaves an absent member out)")
		return
	}
	switch sh.Type {
	case "structure":
		obj, ok := v.(map[string]any)
		if !ok {
			c.add(path, "a %T, want an object (%s)", v, shapeName(c.m, sh))
			return
		}
		byWire := map[string]string{}
		for name, m := range sh.Members {
			byWire[wireName(name, m)] = name
		}
		for k, x := range obj {
			name, ok := byWire[k]
			if !ok {
				c.add(path+"."+k, "%q is not a member of %s", k, shapeName(c.m, sh))
				continue
			}
			if msh := c.shape(path+"."+name, sh.Members[name].Shape); msh != nil {
				c.jsonValue(path+"."+name, msh, x)
			}
		}
		for _, r := range sh.Required {
			if _, ok := obj[wireName(r, sh.Members[r])]; !ok {
				c.add(path+"."+r, "required member missing")
			}
		}
	case "list":
		arr, ok := v.([]any)
		if !ok || sh.Member == nil {
			c.add(path, "a %T, want an array", v)
			return
		}
		msh := c.shape(path, sh.Member.Shape)
		if msh == nil {
			return
		}
		for i, x := range arr {
			c.jsonValue(fmt.Sprintf("%s[%d]", path, i), msh, x)
		}
	case "map":
		obj, ok := v.(map[string]any)
		if !ok || sh.Key == nil || sh.Value == nil {
			c.add(path, "a %T, want an object (a map)", v)
			return
		}
		ksh, vsh := c.shape(path, sh.Key.Shape), c.shape(path, sh.Value.Shape)
		if ksh == nil || vsh == nil {
			return
		}
		for k, x := range obj {
			c.enum(path+"{"+k+"}", ksh, k)
			c.jsonValue(path+"{"+k+"}", vsh, x)
		}
	case "string":
		s, ok := v.(string)
		if !ok {
			c.add(path, "a %T, want a string", v)
			return
		}
		c.enum(path, sh, s)
	case "blob":
		s, ok := v.(string)
		if !ok {
			c.add(path, "a %T, want a base64 string", v)
			return
		}
		c.scalar(path, sh, s, s)
	case "boolean":
		if _, ok := v.(bool); !ok {
			c.add(path, "a %T (%v), want a boolean", v, v)
		}
	case "integer", "long":
		n, ok := v.(json.Number)
		if !ok {
			c.add(path, "a %T (%v), want an %s", v, v, sh.Type)
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			c.add(path, "%s is not an %s", n, sh.Type)
		}
	case "double", "float":
		if _, ok := v.(json.Number); !ok {
			c.add(path, "a %T (%v), want a %s", v, v, sh.Type)
		}
	case "timestamp":
		// awsJson1_0 sends epoch seconds as a number
		n, ok := v.(json.Number)
		if !ok {
			c.add(path, "a %T (%v), want epoch seconds (a number)", v, v)
			return
		}
		if f, err := n.Float64(); err != nil || math.IsNaN(f) || f < 0 {
			c.add(path, "%s is not epoch seconds", n)
		}
	default:
		c.add(path, "shape type %q is not one this checker knows", sh.Type)
	}
}
