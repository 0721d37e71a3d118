package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

func TestRotateStaticFlags(t *testing.T) {
	e := &env{clock: clock.NewFake(testutil.Epoch)}

	for _, tt := range []struct {
		flags rotateStaticFlags
		want  string
	}{
		{rotateStaticFlags{overlap: time.Second}, "--overlap 1s"},
		{rotateStaticFlags{overlap: certs.MaxPreviousTokenLife + time.Hour}, "--overlap"},
		{rotateStaticFlags{overlap: time.Hour, token: "not-a-token"}, "--token"},
		{rotateStaticFlags{overlap: time.Hour, secrets: "/nonexistent/secrets.yaml"}, "--secrets"},
	} {
		if _, err := newStaticRotation(e, tt.flags); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error starting %q", tt.flags, err, tt.want)
		}
	}

	r, err := newStaticRotation(e, rotateStaticFlags{overlap: 90 * time.Minute})
	if err != nil || !r.Generated || r.Token.IsZero() || !r.Expires.Equal(testutil.Epoch.Add(90*time.Minute).UTC()) {
		t.Fatalf("a generated token and the overlap's end: %+v, %v", r, err)
	}
}
