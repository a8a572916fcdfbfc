package awsmodel

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// node is one XML element: its name, its text and its child elements.
type node struct {
	name     string
	text     string
	children []*node
}

func parseXML(body []byte) (*node, error) {
	dec := xml.NewDecoder(bytes.NewReader(body))
	var stack []*node
	var root *node
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name.Local}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			} else if root != nil {
				return nil, fmt.Errorf("a second root element <%s>", t.Name.Local)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no root element")
	}
	return root, nil
}

// ec2Response checks an ec2-protocol response: <OpResponse> holds
// requestId (which the model leaves out of every output shape) and the
// output structure's members.
func (c *checker) ec2Response(output string, body []byte) {
	root, err := parseXML(body)
	if err != nil {
		c.add("", "not XML: %v", err)
		return
	}
	if want := c.op + "Response"; root.name != want {
		c.add("", "root element <%s>, want <%s>", root.name, want)
	}
	var kids []*node
	for _, ch := range root.children {
		if ch.name != "requestId" {
			kids = append(kids, ch)
		}
	}
	if len(kids) != len(root.children)-1 {
		c.add("requestId", "missing or repeated (EC2 answers every call with one requestId)")
	}
	if output == "" {
		// EC2 answers an action without output data with <return>true</return>
		// (EC2 API Reference, the example responses of CreateTags, DeleteTags
		// and the like); botocore's model leaves it out
		for _, ch := range kids {
			if ch.name == "return" && len(ch.children) == 0 && strings.TrimSpace(ch.text) == "true" {
				continue
			}
			c.add(ch.name, "the operation has no output, but the response holds <%s>", ch.name)
		}
		return
	}
	sh := c.shape(output, output)
	if sh == nil {
		return
	}
	c.xmlStructure(output, sh, kids)
}

// wireName is a member's XML element name: its locationName, else its
// member name.
func wireName(name string, m Member) string {
	if m.LocationName != "" {
		return m.LocationName
	}
	return name
}

func (c *checker) xmlStructure(path string, sh *Shape, kids []*node) {
	byWire := map[string]string{}
	for name, m := range sh.Members {
		byWire[wireName(name, m)] = name
	}
	seen := map[string]int{}
	for _, ch := range kids {
		name, ok := byWire[ch.name]
		if !ok {
			c.add(path+"."+ch.name, "<%s> is not a member of %s", ch.name, shapeName(c.m, sh))
			continue
		}
		seen[name]++
		m := sh.Members[name]
		msh := c.shape(path+"."+name, m.Shape)
		if msh == nil {
			continue
		}
		if seen[name] > 1 && !(msh.Type == "list" && (msh.Flattened || m.Flattened)) {
			c.add(path+"."+name, "<%s> appears %d times", ch.name, seen[name])
			continue
		}
		c.xmlValue(path+"."+name, msh, ch)
	}
	for _, r := range sh.Required {
		if seen[r] == 0 {
			c.add(path+"."+r, "required member missing")
		}
	}
}

func (c *checker) xmlValue(path string, sh *Shape, n *node) {
	switch sh.Type {
	case "structure":
		c.xmlStructure(path, sh, n.children)
	case "list":
		if sh.Member == nil {
			c.add(path, "list shape without a member in the model")
			return
		}
		item := "member"
		if sh.Member.LocationName != "" {
			item = sh.Member.LocationName
		}
		msh := c.shape(path, sh.Member.Shape)
		if msh == nil {
			return
		}
		for i, ch := range n.children {
			p := fmt.Sprintf("%s[%d]", path, i)
			if ch.name != item {
				c.add(p, "list element <%s>, want <%s>", ch.name, item)
				continue
			}
			c.xmlValue(p, msh, ch)
		}
	case "map":
		c.xmlMap(path, sh, n)
	default:
		if len(n.children) > 0 {
			c.add(path, "a %s holds elements (<%s>...)", sh.Type, n.children[0].name)
			return
		}
		c.scalar(path, sh, strings.TrimSpace(n.text), n.text)
	}
}

func (c *checker) xmlMap(path string, sh *Shape, n *node) {
	if sh.Key == nil || sh.Value == nil {
		c.add(path, "map shape without key or value in the model")
		return
	}
	kname, vname := "key", "value"
	if sh.Key.LocationName != "" {
		kname = sh.Key.LocationName
	}
	if sh.Value.LocationName != "" {
		vname = sh.Value.LocationName
	}
	ksh, vsh := c.shape(path, sh.Key.Shape), c.shape(path, sh.Value.Shape)
	if ksh == nil || vsh == nil {
		return
	}
	for i, entry := range n.children {
		p := fmt.Sprintf("%s{%d}", path, i)
		var k, v *node
		for _, ch := range entry.children {
			switch ch.name {
			case kname:
				k = ch
			case vname:
				v = ch
			default:
				c.add(p, "map entry holds <%s>, want <%s> and <%s>", ch.name, kname, vname)
			}
		}
		if k == nil || v == nil {
			c.add(p, "map entry without <%s> or <%s>", kname, vname)
			continue
		}
		c.xmlValue(p+".key", ksh, k)
		c.xmlValue(p+".value", vsh, v)
	}
}

// scalar checks a scalar's text (trimmed; raw for strings).
func (c *checker) scalar(path string, sh *Shape, v, raw string) {
	switch sh.Type {
	case "string":
		c.enum(path, sh, raw)
	case "integer", "long":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			c.add(path, "%q is not an %s", clip(v), sh.Type)
		}
	case "double", "float":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			c.add(path, "%q is not a %s", clip(v), sh.Type)
		}
	case "boolean":
		if v != "true" && v != "false" {
			c.add(path, "%q is not a boolean (true or false)", clip(v))
		}
	case "timestamp":
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			c.add(path, "%q is not an ISO 8601 timestamp", clip(v))
		}
	case "blob":
		if _, err := base64.StdEncoding.DecodeString(v); err != nil {
			c.add(path, "%q is not base64", clip(v))
		}
	default:
		c.add(path, "shape type %q is not one this checker knows", sh.Type)
	}
}

func shapeName(m *Model, sh *Shape) string {
	for n, s := range m.Shapes {
		if s == sh {
			return n
		}
	}
	return "its structure"
}
