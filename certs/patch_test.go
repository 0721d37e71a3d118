package certs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/certs"
)

func TestPatchMachineConfig(t *testing.T) {
	doc := []byte("machine:\n  time:\n    servers: [a:123]\n  token: abc\ncluster:\n  name: c\n")

	tests := []struct {
		name    string
		patches []string
		want    []string // substrings of the result
		not     []string
		wantErr string
	}{
		{
			name:    "json patch",
			patches: []string{`[{"op":"replace","path":"/machine/time/servers","value":["b:123"]}]`},
			want:    []string{"- b:123", "token: abc"},
			not:     []string{"a:123"},
		},
		{
			name:    "yaml merge patch",
			patches: []string{"machine:\n  time:\n    servers: [c:123]\ncluster:\n  workerSANs: [w.example]\n"},
			want:    []string{"- c:123", "token: abc", "- w.example", "name: c"},
		},
		{
			name:    "null deletes",
			patches: []string{`{"machine":{"token":null}}`},
			not:     []string{"token"},
		},
		{
			name:    "in order",
			patches: []string{`[{"op":"add","path":"/cluster/workerSANs","value":["xx"]}]`, "cluster:\n  workerSANs: [yy]\n"},
			want:    []string{"- yy"},
			not:     []string{"- xx"},
		},
		{name: "bad op", patches: []string{`[{"op":"replace","path":"/nowhere/at/all","value":1}]`}, wantErr: "patch 1"},
		{name: "scalar", patches: []string{`42`}, wantErr: "patch 1: want"},
		{name: "too large", patches: []string{"[]", "#" + strings.Repeat("x", certs.MaxDocumentSize)}, wantErr: "patch 2: 1048577 bytes, limit 1048576"},
		{name: "not yaml", patches: []string{"{", "[]"}, wantErr: "patch 1: neither YAML nor JSON"},
		{name: "second fails", patches: []string{"[]", `[{"op":"remove","path":"/machine/nothing"}]`}, wantErr: "patch 2"},
		{
			name:    "numbers kept",
			patches: []string{`[{"op":"add","path":"/machine/port","value":1000000}]`, "machine:\n  big: 12345678901234567\n"},
			want:    []string{"port: 1000000\n", "big: 12345678901234567\n"},
		},
		{
			name:    "merge into a scalar",
			patches: []string{`{"cluster":{"name":{"x":1,"y":null}}}`},
			want:    []string{"name:\n        x: 1"},
			not:     []string{"y:"},
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps [][]byte
			for _, p := range tt.patches {
				ps = append(ps, []byte(p))
			}

			out, err := certs.PatchMachineConfig(doc, ps)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}

				var pe *certs.PatchError
				if !errors.As(err, &pe) {
					t.Fatalf("err %T, want a *certs.PatchError", err)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("result lacks %q:\n%s", w, out)
				}
			}

			for _, n := range tt.not {
				if strings.Contains(string(out), n) {
					t.Errorf("result holds %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestPatchMachineConfigBadDocument(t *testing.T) {
	for _, doc := range []string{"- a\n- b\n", "{", "#" + strings.Repeat("x", certs.MaxDocumentSize)} {
		if _, err := certs.PatchMachineConfig([]byte(doc), nil); err == nil || !strings.Contains(err.Error(), "the config to patch") {
			t.Errorf("%q: err %v, want one naming the config to patch", doc, err)
		}
	}
}

// TestPatchMachineConfigCopiesBounded: copies double what they copy; the
// config is bounded after each operation, so a short patch cannot grow it
// without limit.
func TestPatchMachineConfigCopiesBounded(t *testing.T) {
	doc := []byte("machine:\n  a: [" + strings.Repeat(`"xxxxxxxxxxxxxxxx",`, 64) + "\"x\"]\n")

	var ops []string
	for i := range 40 {
		ops = append(ops, fmt.Sprintf(`{"op": "copy", "from": "/machine/a", "path": "/machine/b%d"}`, i),
			fmt.Sprintf(`{"op": "copy", "from": "/machine", "path": "/machine/a/-"}`))
	}

	_, err := certs.PatchMachineConfig(doc, [][]byte{[]byte("[" + strings.Join(ops, ",") + "]")})

	var pe *certs.PatchError
	if !errors.As(err, &pe) || pe.Index != 1 || !strings.Contains(err.Error(), "(copy): the config grew to") {
		t.Fatalf("err = %v, want patch 1 refused when a copy grows the config past the limit", err)
	}
}
