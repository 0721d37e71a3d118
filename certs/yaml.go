package certs

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v4"
)

// MaxDocumentSize bounds every YAML document Aegis reads. The largest honest
// one, a machine config with a handful of accepted CAs, is a few KiB.
const MaxDocumentSize = 1 << 20

// Base64PEM is PEM data that YAML carries base64-encoded, as Talos's
// secrets.yaml and talosconfig do.
type Base64PEM []byte

// MarshalYAML encodes the PEM as a base64 string.
func (b Base64PEM) MarshalYAML() (any, error) {
	return base64.StdEncoding.EncodeToString(b), nil
}

// UnmarshalYAML decodes a base64 string.
func (b *Base64PEM) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a base64 string", n.Line)
	}

	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("line %d: not base64: %w", n.Line, err)
	}

	*b = raw

	return nil
}

// decodeStrict decodes one YAML document into out, refusing unknown fields,
// duplicate keys and extra documents. Unknown fields are reported all at
// once, each with its path and line; type errors carry their line.
func decodeStrict(what string, data []byte, out any) error {
	if len(data) > MaxDocumentSize {
		return &ValidationError{What: what, Problems: []Problem{{Message: fmt.Sprintf("document is %d bytes, limit %d", len(data), MaxDocumentSize)}}}
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))

	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &ValidationError{What: what, Problems: []Problem{{Message: "document is empty"}}}
		}

		return &ValidationError{What: what, Problems: []Problem{{Message: "not valid YAML: " + err.Error()}}}
	}

	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return &ValidationError{What: what, Problems: []Problem{{Message: "holds more than one YAML document"}}}
	}

	var ps problems
	if len(root.Content) == 1 {
		unknownFields(root.Content[0], reflect.TypeOf(out), "", &ps)
	}

	if len(ps) > 0 {
		return ps.err(what)
	}

	if err := root.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				ps.add("", "%s", e)
			}

			return ps.err(what)
		}

		return &ValidationError{What: what, Problems: []Problem{{Message: err.Error()}}}
	}

	return nil
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	base64PEMType   = reflect.TypeFor[Base64PEM]()
	anyType         = reflect.TypeFor[any]()
)

// unknownFields walks a YAML node beside the Go type it will decode into and
// records every mapping key the type has no field for, and every base64
// field that does not decode, each with its path.
func unknownFields(n *yaml.Node, t reflect.Type, path string, ps *problems) {
	// An alias could smuggle a mapping past this walk (or loop it); configs
	// have no use for them.
	if n.Kind == yaml.AliasNode {
		ps.add(path, "YAML aliases are not supported (line %d)", n.Line)

		return
	}

	if t == base64PEMType {
		var b Base64PEM
		if err := b.UnmarshalYAML(n); err != nil {
			ps.add(path, "%v", err)
		}

		return
	}

	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return
		}

		t = t.Elem()
	}

	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}

	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields, keepsUnknown := yamlFields(t)

		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]

			f, ok := fields[key.Value]
			switch {
			case ok:
				unknownFields(val, f.Type, join(path, key.Value), ps)
			case keepsUnknown:
				// Kept as it is, but still no aliases.
				unknownFields(val, anyType, join(path, key.Value), ps)
			default:
				ps.add(join(path, key.Value), "unknown field (line %d)", key.Line)
			}
		}
	case t.Kind() == reflect.Interface:
		for _, c := range n.Content {
			unknownFields(c, t, path, ps)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), ps)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			unknownFields(item, t.Elem(), index(path, i), ps)
		}
	}
}

// yamlFields returns the fields of struct type t by YAML name, and whether
// t keeps unknown fields in an inline map.
func yamlFields(t reflect.Type) (map[string]reflect.StructField, bool) {
	fields := map[string]reflect.StructField{}
	keepsUnknown := false

	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}

		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")

		switch {
		case opts == "inline" && f.Type.Kind() == reflect.Map:
			keepsUnknown = true

			continue
		case name == "-":
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}

		fields[name] = f
	}

	return fields, keepsUnknown
}

func join(path, key string) string {
	if path == "" {
		return key
	}

	return path + "." + key
}

// encodeYAML marshals v with the four-space indentation Talos files use.
func encodeYAML(v any) ([]byte, error) {
	var buf bytes.Buffer

	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)

	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("certs: encoding YAML: %w", err)
	}

	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("certs: encoding YAML: %w", err)
	}

	return buf.Bytes(), nil
}
