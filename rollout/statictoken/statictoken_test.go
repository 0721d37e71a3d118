package statictoken

import (
	"slices"
	"testing"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/rollout"
	"github.com/aegis-os/aegis/token"
)

func mustToken(t *testing.T, s string) token.Token {
	t.Helper()

	tok, err := token.Parse(s)
	if err != nil {
		t.Fatal(err)
	}

	return tok
}

// rotationConfigs are a control plane's and a worker's config of one
// bundle, the control plane's listing prev as previous tokens.
func rotationConfigs(t *testing.T, endpoint string, prev ...certs.PreviousToken) (cp, worker *certs.MachineConfig) {
	t.Helper()

	now := testutil.Epoch

	bundle, err := certs.GenerateBundle(certs.BundleOptions{Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}

	opts := certs.ConfigOptions{ClusterName: "rot", Endpoint: endpoint, TrustHostClock: true}

	if cp, err = certs.GenerateMachineConfig(bundle, certs.NodeControlPlane, opts, now); err != nil {
		t.Fatal(err)
	}

	if worker, err = certs.GenerateMachineConfig(bundle, certs.NodeWorker, opts, now); err != nil {
		t.Fatal(err)
	}

	cp.Machine.PreviousTokens = prev
	if err := cp.Validate("cp", now); err != nil {
		t.Fatal(err)
	}

	return cp, worker
}

// TestWithNewToken: step 1 makes the new token current and the old one
// previous until the overlap ends; previous tokens expired meanwhile, and
// the new token if it was one, go. The result validates.
func TestWithNewToken(t *testing.T) {
	now := testutil.Epoch.Add(time.Hour)
	live := certs.PreviousToken{Token: "livetk.aaaaaaaaaaaaaaaa", Expires: now.Add(time.Minute)}
	expired := certs.PreviousToken{Token: "deadtk.bbbbbbbbbbbbbbbb", Expires: now}
	fresh := mustToken(t, "freshk.cccccccccccccccc")
	wasFresh := certs.PreviousToken{Token: fresh.Reveal(), Expires: now.Add(time.Minute)}

	cur, _ := rotationConfigs(t, "10.0.0.1", expired, live, wasFresh)
	expires := now.Add(30 * time.Minute)

	got := WithNewToken(cur, fresh, expires, now)

	want := []certs.PreviousToken{live, {Token: cur.Machine.Token, Expires: expires}}
	if got.Machine.Token != fresh.Reveal() || !slices.Equal(got.Machine.PreviousTokens, want) {
		t.Fatalf("token %s, previous %v; want the new token and %v", got.Machine.Token, got.Machine.PreviousTokens, want)
	}

	if len(cur.Machine.PreviousTokens) != 3 || cur.Machine.Token == fresh.Reveal() {
		t.Fatal("WithNewToken changed the config it was given")
	}

	if err := got.Validate("rotated", now); err != nil {
		t.Fatal(err)
	}
}

// TestRotationMembers: the old tokens are every member's other than the
// new one, once each; a control-plane endpoint that no member is, by name
// or address, is named.
func TestRotationMembers(t *testing.T) {
	prev := certs.PreviousToken{Token: "prevtk.aaaaaaaaaaaaaaaa", Expires: testutil.Epoch.Add(time.Hour)}
	cp, worker := rotationConfigs(t, "10.0.0.1:50001", prev)
	_, other := rotationConfigs(t, "cp-2")
	fresh := worker.TrustdToken()

	r := &Rotation{opts: Options{Token: fresh}, members: []*Node{
		{Member: rollout.Member{Name: "cp-1", Addr: "10.0.0.1", Addrs: []string{"10.0.0.1"}}, Config: cp},
		{Member: rollout.Member{Name: "w-1", Addr: "10.0.0.5", Addrs: []string{"10.0.0.5"}}, Config: worker},
		{Member: rollout.Member{Name: "w-2", Addr: "10.0.0.6", Addrs: []string{"10.0.0.6"}}, Config: other},
		{Member: rollout.Member{Name: "w-3", Addr: "10.0.0.7"}, Err: errTestDown},
	}}

	var old []string
	for _, tok := range r.oldTokens() {
		old = append(old, tok.Reveal())
	}

	want := []string{prev.Token, other.Machine.Token}
	if cp.Machine.Token != fresh.Reveal() {
		t.Fatal("the configs of one bundle hold different tokens")
	}

	if !slices.Equal(old, want) {
		t.Fatalf("old tokens %v, want %v", old, want)
	}

	if got := r.unlistedEndpoints(); !slices.Equal(got, []string{"cp-2"}) {
		t.Fatalf("unlisted endpoints %v, want [cp-2]", got)
	}

	if r.members[3].ControlPlane() || !r.members[0].ControlPlane() {
		t.Fatal("roles taken wrongly")
	}
}

var errTestDown = testError("connection refused")

type testError string

func (e testError) Error() string { return string(e) }
