package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/certs"
)

func TestJSONPathOutput(t *testing.T) {
	t.Run("flag", func(t *testing.T) {
		for in, want := range map[string]string{
			"jsonpath={.a}":  "",
			"jsonpath=":      "empty template",
			"jsonpath={.a":   "unclosed action",
			"go-template={}": "unknown output format",
		} {
			var f outputFormat

			err := f.Set(in)
			if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
				t.Errorf("Set(%q) = %v, want %q", in, err, want)
			}
		}
	})

	t.Run("API reply", func(t *testing.T) {
		resp := &machine.HostnameResponse{Messages: []*machine.Hostname{
			{Metadata: &common.Metadata{Hostname: "10.0.0.2"}, Hostname: "cp-1"},
			{Metadata: &common.Metadata{Hostname: "10.0.0.3"}, Hostname: "worker-1"},
		}}

		var out bytes.Buffer
		if err := writeReply(&out, "jsonpath={range .messages[*]}{.metadata.hostname}={.hostname} {end}", resp); err != nil {
			t.Fatal(err)
		}

		if got := out.String(); got != "10.0.0.2=cp-1 10.0.0.3=worker-1 \n" {
			t.Fatalf("output %q", got)
		}

		if err := writeReply(&bytes.Buffer{}, "jsonpath={.nosuchfield}", resp); err == nil || !strings.Contains(err.Error(), "nosuchfield") {
			t.Fatalf("missing field: err = %v", err)
		}
	})

	t.Run("command document", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "aegisconfig")
		c := &certs.ClientConfig{Context: "prod", Contexts: map[string]*certs.ClientContext{
			"prod": {Endpoints: []string{"10.0.0.1"}}, "lab": {Endpoints: []string{"10.1.0.1"}},
		}}

		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}

		out, _, err := runCLI(t, time.Now(), "--aegisconfig", path, "config", "contexts", "-o", "jsonpath={[?(@.current==true)].name}")
		if err != nil || out != "prod\n" {
			t.Fatalf("config contexts -o jsonpath: %q, %v", out, err)
		}
	})
}
