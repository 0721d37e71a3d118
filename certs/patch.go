package certs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch"
	"go.yaml.in/yaml/v4"
)

// PatchError is the failure of one patch of PatchMachineConfig.
type PatchError struct {
	// Index is the patch's place in the list, counted from 1.
	Index int
	// Err is the problem.
	Err error
}

func (e *PatchError) Error() string { return fmt.Sprintf("patch %d: %v", e.Index, e.Err) }

func (e *PatchError) Unwrap() error { return e.Err }

// errPatchShape is the problem of a patch that is neither kind.
var errPatchShape = errors.New("want a list of JSON patch operations or a partial config")

// PatchMachineConfig applies patches in order to doc, a machine config in
// YAML, and returns the result in YAML. A patch, in YAML or JSON, is either
// a list of RFC 6902 JSON patch operations or a partial config merged in as
// an RFC 7386 merge patch (mappings key by key, a null deletes its key,
// lists and values replaced). Each input is bounded by MaxDocumentSize. A
// failure of a patch is a *PatchError naming it.
//
// The result is not validated here: the node that receives it validates
// the whole config before anything changes.
func PatchMachineConfig(doc []byte, patches [][]byte) ([]byte, error) {
	if len(doc) > MaxDocumentSize {
		return nil, fmt.Errorf("certs: the config to patch is %d bytes, limit %d", len(doc), MaxDocumentSize)
	}

	current, err := yamlToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("certs: the config to patch: %w", err)
	}

	for i, p := range patches {
		if current, err = applyPatch(current, p); err != nil {
			return nil, &PatchError{Index: i + 1, Err: err}
		}
	}

	return jsonToYAML(current)
}

// applyPatch applies one patch to a JSON document.
func applyPatch(doc, patch []byte) ([]byte, error) {
	if len(patch) > MaxDocumentSize {
		return nil, fmt.Errorf("%d bytes, limit %d", len(patch), MaxDocumentSize)
	}

	var tree any
	if err := yaml.Unmarshal(patch, &tree); err != nil {
		return nil, fmt.Errorf("neither YAML nor JSON: %w", err)
	}

	switch tree.(type) {
	case []any, map[string]any:
	default:
		return nil, errPatchShape
	}

	data, err := json.Marshal(tree)
	if err != nil {
		return nil, err
	}

	if _, merge := tree.(map[string]any); merge {
		return jsonpatch.MergePatch(doc, data)
	}

	ops, err := jsonpatch.DecodePatch(data)
	if err != nil {
		return nil, err
	}

	return applyOps(doc, ops)
}

// applyOps applies ops one at a time and bounds the document after each:
// a copy doubles what it copies, so a short list of copies would otherwise
// grow the config without limit before the result could be measured.
func applyOps(doc []byte, ops jsonpatch.Patch) ([]byte, error) {
	var err error

	for i, op := range ops {
		if doc, err = (jsonpatch.Patch{op}).Apply(doc); err != nil {
			return nil, err
		}

		if len(doc) > MaxDocumentSize {
			return nil, fmt.Errorf("operation %d (%s): the config grew to %d bytes, limit %d", i+1, op.Kind(), len(doc), MaxDocumentSize)
		}
	}

	return doc, nil
}

// yamlToJSON turns a YAML mapping into JSON.
func yamlToJSON(doc []byte) ([]byte, error) {
	var tree any
	if err := yaml.Unmarshal(doc, &tree); err != nil {
		return nil, err
	}

	if _, ok := tree.(map[string]any); !ok {
		return nil, errors.New("not a YAML mapping")
	}

	return json.Marshal(tree)
}

// jsonToYAML turns JSON into YAML. Integers stay integers (a float64
// would write a port of 1000000 as 1e+06).
func jsonToYAML(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()

	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}

	return yaml.Marshal(numbers(tree))
}

// numbers replaces the json.Numbers of a decoded tree by int64 or float64,
// which YAML writes unquoted.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}

		if f, err := v.Float64(); err == nil {
			return f
		}
	}

	return v
}
