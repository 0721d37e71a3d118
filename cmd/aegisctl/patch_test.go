package main

import (
	"strings"
	"testing"
)

func TestApplyPatches(t *testing.T) {
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
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps [][]byte
			for _, p := range tt.patches {
				ps = append(ps, []byte(p))
			}

			out, err := applyPatches(doc, ps)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
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
