package apid

import (
	"context"
	"crypto/x509"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/aegis-os/aegis/authz"
)

// connState is what apid keeps for one client connection: its key in the
// stream caps, and the facts of its client certificate, worked out at its
// first call and read by the others. The certificate cannot change while
// the connection is open (TLS 1.3 has no renegotiation); what can (the
// revocation list, the accepted CAs, the time) is checked at every call.
type connState struct {
	key string
	// peerAddr is the client's address, for the request log.
	peerAddr string
	peer     atomic.Pointer[peerState]
}

// peerState is what a verified client chain says that stays true while
// its connection is open.
type peerState struct {
	leaf *x509.Certificate
	// id is the caller's identity for the stream caps and the pool.
	id identity
	// serial is the leaf's serial number as Revocations lists it.
	serial string
	// notBefore and notAfter bound the time at which every certificate of
	// the chain is valid.
	notBefore, notAfter time.Time
}

func newPeerState(chain []*x509.Certificate) *peerState {
	p := &peerState{leaf: chain[0], id: identityOf(chain[0]), serial: serialText(chain[0]), notAfter: chainNotAfter(chain)}
	for _, c := range chain {
		if c.NotBefore.After(p.notBefore) {
			p.notBefore = c.NotBefore
		}
	}

	return p
}

type connStateKey struct{}

// connStats adds a connState, and authz's memo of the certificate's roles
// and name, to the context of every connection apid accepts, from which
// each call's context derives. It wraps apid's one stats handler, so no
// call pays for a second one.
type connStats struct {
	stats.Handler
}

func (h connStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	ctx = h.Handler.TagConn(ctx, info)
	st := &connState{key: addrKey(info.RemoteAddr, info.LocalAddr)}
	if info.RemoteAddr != nil {
		st.peerAddr = info.RemoteAddr.String()
	}

	return authz.ContextWithConnMemo(context.WithValue(ctx, connStateKey{}, st))
}

// peerOf returns the facts of chain, from the call's connState when they
// are there for this very certificate.
func peerOf(ctx context.Context, chain []*x509.Certificate) *peerState {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if st != nil {
		if p := st.peer.Load(); p != nil && p.leaf == chain[0] {
			return p
		}
	}

	p := newPeerState(chain)
	if st != nil {
		st.peer.Store(p)
	}

	return p
}

// connKey names the call's connection: its two addresses, which no other
// open TCP connection shares.
func connKey(ctx context.Context) string {
	if st, ok := ctx.Value(connStateKey{}).(*connState); ok {
		return st.key
	}

	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}

	return addrKey(p.Addr, p.LocalAddr)
}

func addrKey(remote, local net.Addr) string {
	if remote == nil {
		return ""
	}

	key := remote.String() + "|"
	if local != nil {
		key += local.String()
	}

	return key
}
