package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v4"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// outputFormat is the -o flag of the commands that print API replies.
type outputFormat string

// The output formats.
const (
	formatTable outputFormat = "table"
	formatJSON  outputFormat = "json"
	formatYAML  outputFormat = "yaml"
	// formatWide is the table with more columns, for the commands whose
	// table has more to give (addWideOutputFlag).
	formatWide outputFormat = "wide"
)

// formatFlag is the -o flag: the format, and whether the command has a
// wide table.
type formatFlag struct {
	f    *outputFormat
	wide bool
}

func (ff formatFlag) String() string { return ff.f.String() }

func (ff formatFlag) Type() string { return ff.f.Type() }

// Set accepts wide where the command has a wide table, the rest as
// outputFormat.Set does.
func (ff formatFlag) Set(s string) error {
	if outputFormat(s) == formatWide {
		if !ff.wide {
			return errors.New("-o wide: this command's table has no more columns to show (table, json, yaml or jsonpath=TEMPLATE)")
		}

		*ff.f = formatWide

		return nil
	}

	return ff.f.Set(s)
}

// String implements pflag.Value.
func (f *outputFormat) String() string { return string(*f) }

// Type implements pflag.Value.
func (f *outputFormat) Type() string { return "format" }

// Set implements pflag.Value: only the known formats are accepted.
func (f *outputFormat) Set(s string) error {
	switch v := outputFormat(s); v {
	case formatTable, formatJSON, formatYAML:
		*f = v

		return nil
	default:
		if tmpl, ok := v.jsonpathTemplate(); ok {
			if _, err := parseJSONPath(tmpl); err != nil {
				return err
			}

			*f = v

			return nil
		}

		return fmt.Errorf("unknown output format %q (table, json, yaml or jsonpath=TEMPLATE)", s)
	}
}

// addOutputFlag gives a command printing API replies the -o flag, table
// by default.
func addOutputFlag(cmd *cobra.Command) *outputFormat {
	return addFormatFlag(cmd, "output format: table, json, yaml (the API replies as they are) or jsonpath=TEMPLATE (over the json)")
}

// addDocumentFlag gives a command printing its own findings the -o flag.
func addDocumentFlag(cmd *cobra.Command) *outputFormat {
	return addFormatFlag(cmd, "output format: table, json, yaml or jsonpath=TEMPLATE (over the json)")
}

// addWideOutputFlag is addOutputFlag for a command whose table has a wide
// form with more columns.
func addWideOutputFlag(cmd *cobra.Command) *outputFormat {
	return addFormatFlagWide(cmd, "output format: table, wide (more columns), json, yaml (the API replies as they are) or jsonpath=TEMPLATE (over the json)", true)
}

func addFormatFlag(cmd *cobra.Command, usage string) *outputFormat {
	return addFormatFlagWide(cmd, usage, false)
}

func addFormatFlagWide(cmd *cobra.Command, usage string, wide bool) *outputFormat {
	f := formatTable
	cmd.Flags().VarP(formatFlag{f: &f, wide: wide}, "output", "o", usage)

	formats := []string{string(formatTable), string(formatJSON), string(formatYAML)}
	if wide {
		formats = slices.Insert(formats, 1, string(formatWide))
	}

	//nolint:errcheck // the flag was just added
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))

	return &f
}

// writeReply prints an API reply as JSON or YAML. Fields are the protobuf
// JSON names; key order is stable, so output can be compared and diffed.
func writeReply(w io.Writer, format outputFormat, msg proto.Message) error {
	doc, err := replyDocument(msg)
	if err != nil {
		return err
	}

	if tmpl, ok := format.jsonpathTemplate(); ok {
		return writeJSONPath(w, tmpl, doc)
	}

	var out []byte

	switch format {
	case formatYAML:
		out, err = yaml.Marshal(doc)
	default:
		out, err = json.MarshalIndent(doc, "", "  ")
		out = append(out, '\n')
	}

	if err != nil {
		return err
	}

	_, err = w.Write(out)

	return err
}

// writeStreamed prints one message of a stream: a line of JSON each (JSON
// Lines), or one YAML document each.
func writeStreamed(w io.Writer, format outputFormat, msg proto.Message) error {
	doc, err := replyDocument(msg)
	if err != nil {
		return err
	}

	if tmpl, ok := format.jsonpathTemplate(); ok {
		return writeJSONPath(w, tmpl, doc)
	}

	var out []byte

	if format == formatYAML {
		body, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}

		out = append([]byte("---\n"), body...)
	} else {
		if out, err = json.Marshal(doc); err != nil {
			return err
		}

		out = append(out, '\n')
	}

	_, err = w.Write(out)

	return err
}

// replyDocument is msg as generic JSON values. protojson's own spacing is
// deliberately unstable, so its output is decoded and encoded again.
func replyDocument(msg proto.Message) (any, error) {
	raw, err := protojson.Marshal(msg)
	if err != nil {
		return nil, err
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()

	var doc any
	if err = dec.Decode(&doc); err != nil {
		return nil, err
	}

	return yamlSafe(doc), nil
}

// yamlSafe turns json.Number into the int or float it holds, which the
// YAML encoder writes as a plain number.
func yamlSafe(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = yamlSafe(e)
		}
	case []any:
		for i, e := range t {
			t[i] = yamlSafe(e)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}

		if f, err := t.Float64(); err == nil {
			return f
		}
	}

	return v
}
