package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// schemaError is where a document departs from Config's schema.
type schemaError struct {
	field string // YAML path, e.g. "engine.spill.threshold" or "engine.protectedTools[0]"
	line  int
	msg   string
}

// document parses data into a YAML node tree (JSON is YAML too) for locating problems; nil
// when it does not parse.
func document(data []byte) *yaml.Node {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// checkSchema walks the document against Config's fields (matched by JSON name, exactly or
// else ignoring case, as the decoder does) and returns its first unknown field, repeated key
// or value of the wrong type; nil when it finds none.
func checkSchema(root *yaml.Node) *schemaError {
	if root == nil {
		return nil
	}
	return walk(root, reflect.TypeOf(Config{}), "")
}

var (
	durationType        = reflect.TypeOf(Duration(0))
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// yaml11Bool holds the YAML 1.1 booleans the decoder reads as such (YAML 1.2, which the node
// tree follows, reads them as strings).
var yaml11Bool = map[string]bool{"yes": true, "no": true, "on": true, "off": true, "y": true, "n": true}

func walk(n *yaml.Node, t reflect.Type, path string) *schemaError {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // null leaves the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(msg string) *schemaError {
		if n.Kind == yaml.ScalarNode {
			msg += fmt.Sprintf(" (got %q)", n.Value)
		}
		return &schemaError{field: path, line: n.Line, msg: msg}
	}
	scalar := func(want string, tags ...string) *schemaError {
		if n.Kind == yaml.ScalarNode {
			for _, tag := range tags {
				if n.Tag == tag {
					return nil
				}
			}
		}
		return bad("must be " + want)
	}
	switch {
	case t == durationType:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
			if _, err := time.ParseDuration(n.Value); err == nil {
				return nil
			}
		}
		return bad(`must be a duration such as "20s" or "1m30s"`)
	case reflect.PointerTo(t).Implements(textUnmarshalerType): // a name, such as a wire.Format
		if n.Kind != yaml.ScalarNode {
			return bad("must be a string")
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			return &schemaError{field: path, line: n.Line, msg: err.Error()}
		}
		return scalar("a string", "!!str")
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad("must be a mapping")
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			at := join(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				return &schemaError{field: at, line: k.Line, msg: fmt.Sprintf("repeated key (first at line %d)", first)}
			}
			seen[k.Value] = k.Line
			f, ok := fieldByName(t, k.Value)
			if !ok {
				return &schemaError{field: at, line: k.Line, msg: "unknown field (known here: " + strings.Join(fieldNames(t), ", ") + ")"}
			}
			if e := walk(v, f.Type, at); e != nil {
				return e
			}
		}
		return nil
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad("must be a list")
		}
		for i, v := range n.Content {
			if e := walk(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); e != nil {
				return e
			}
		}
		return nil
	case t.Kind() == reflect.String: // the decoder takes any scalar as a string
		return scalar("a string", "!!str", "!!int", "!!float", "!!bool")
	case t.Kind() == reflect.Bool:
		if n.Kind == yaml.ScalarNode && yaml11Bool[strings.ToLower(n.Value)] {
			return nil
		}
		return scalar("true or false", "!!bool")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return scalar("an integer", "!!int")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return scalar("a number", "!!int", "!!float")
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonName is the JSON name of a struct field ("" when it is not decoded).
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func fieldByName(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold *reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch name := jsonName(f); {
		case name == "":
		case name == key:
			return f, true
		case fold == nil && strings.EqualFold(name, key):
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name := jsonName(t.Field(i)); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// lineOf returns the line of the key named by a dotted field path (with [i] list indexes) in
// the document, or 0 when the document does not set it.
func lineOf(root *yaml.Node, field string) int {
	n, line := root, 0
	for _, part := range strings.Split(field, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if n == nil || n.Kind != yaml.MappingNode {
			return 0
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == name || (next == nil && strings.EqualFold(k.Value, name)) {
				next, line = n.Content[i+1], k.Line
				if k.Value == name {
					break
				}
			}
		}
		if next == nil {
			return 0
		}
		n = next
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return 0
			}
			n, line = n.Content[i], n.Content[i].Line
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return line
}
