package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// -o jsonpath=TEMPLATE, as kubectl has it: the template runs over the same
// document -o json prints (the API reply as it is, or the command's own
// document), so a field is found by the name -o json shows. The parser is
// client-go's util/jsonpath, which brings only its own fork of
// text/template: a kept implementation of the syntax kubectl users know.

// jsonpathPrefix starts a jsonpath output format.
const jsonpathPrefix = "jsonpath="

// jsonpathTemplate returns the template of a jsonpath format.
func (f outputFormat) jsonpathTemplate() (string, bool) {
	return strings.CutPrefix(string(f), jsonpathPrefix)
}

// parseJSONPath parses a template, so that -o fails before anything runs.
func parseJSONPath(tmpl string) (*jsonpath.JSONPath, error) {
	if strings.TrimSpace(tmpl) == "" {
		return nil, fmt.Errorf("-o %s: empty template (for example -o 'jsonpath={.messages[*].metadata.hostname}')", jsonpathPrefix)
	}

	jp := jsonpath.New("output")
	if err := jp.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("-o %s%s: %w", jsonpathPrefix, tmpl, err)
	}

	return jp, nil
}

// writeJSONPath prints the template's result over doc, generic JSON
// values, and a newline. A field the template names that doc lacks is an
// error, as in kubectl.
func writeJSONPath(w io.Writer, tmpl string, doc any) error {
	jp, err := parseJSONPath(tmpl)
	if err != nil {
		return err
	}

	var out bytes.Buffer
	if err = jp.Execute(&out, doc); err != nil {
		return fmt.Errorf("-o %s%s: %w", jsonpathPrefix, tmpl, err)
	}

	out.WriteByte('\n')

	_, err = w.Write(out.Bytes())

	return err
}

// genericDocument is v as generic JSON values, as -o json prints it.
func genericDocument(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()

	var doc any
	if err = dec.Decode(&doc); err != nil {
		return nil, err
	}

	return doc, nil
}
