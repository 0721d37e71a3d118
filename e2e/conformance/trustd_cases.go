package conformance

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
)

// tokenFunc gives the metadata a case sends: token key/value pairs.
type tokenFunc func(e *Env) []string

func withToken(pick func(e *Env) string) tokenFunc {
	return func(e *Env) []string { return []string{wire.MetadataToken, pick(e)} }
}

func staticToken(e *Env) string { return e.static }
func validToken(e *Env) string  { return e.tokens.valid }

// certCase is one Certificate call to the target's trustd, from a source
// of its own, whose code, audit record and (for OK) certificate it checks.
func certCase(name string, want codes.Code, tok tokenFunc, csr csrFunc) *Case {
	return certCaseAt(name, want, tok, anySource(csr))
}

// certCaseAt is certCase with a CSR made for the case's source address.
func certCaseAt(name string, want codes.Code, tok tokenFunc, csr atSource) *Case {
	c := &Case{Group: "trustd", Name: name, Expected: want.String()}
	if want == codes.OK {
		c.Issues = 1
	}

	c.Run = func(ctx context.Context, e *Env, r *Report) string {
		return e.certifyAndCheck(ctx, e.Target, tok(e), csr, want, r)
	}

	return c
}

// certifyAndCheck makes the call and checks its audit record: exactly one,
// from the case's source, with the code the call got.
func (e *Env) certifyAndCheck(ctx context.Context, node string, md []string, csr atSource, want codes.Code, r *Report) string {
	source, err := e.sources.take()
	if err != nil {
		r.Problemf("%v", err)

		return "not run"
	}

	body, err := csr(source)
	if err != nil {
		r.Problemf("building the CSR: %v", err)

		return "not run"
	}

	skip, err := e.auditCount(ctx, node)
	if err != nil {
		r.Problemf("reading the audit log: %v", err)
	}

	resp, err := e.certify(ctx, node, source, md, body)
	got := codeOf(err)

	if err == nil {
		e.checkIssued(resp, r)
	} else if resp.GetCrt() != nil {
		r.Problemf("a refusal carried a certificate")
	}

	e.checkAudit(ctx, node, source, skip, []string{got}, r)

	return got
}

// trustdCases are the token and CSR cases of the target's trustd.
func trustdCases() []*Case {
	unauth, invalid := codes.Unauthenticated, codes.InvalidArgument
	// good names the caller's own address: what every token obtains.
	good := func() ([]byte, error) { return goodCSR("127.0.0.1") }
	valid := withToken(validToken)

	return []*Case{
		certCaseAt("control: static token, CSR for the caller's own address", codes.OK, withToken(staticToken), goodCSR),
		certCase("control: restricted token, CSR within its SANs", codes.OK, withToken(func(e *Env) string { return e.tokens.restricted }), csrInside),
		certCase("no token", unauth, func(*Env) []string { return nil }, good),
		certCase("malformed token", unauth, withToken(func(*Env) string { return "conformance" }), good),
		certCase("two token values", unauth, func(e *Env) []string {
			return []string{wire.MetadataToken, e.static, wire.MetadataToken, e.tokens.valid}
		}, good),
		certCase("token under another metadata key", unauth, func(e *Env) []string { return []string{"authorization", "Bearer " + e.static} }, good),
		certCase("unknown token id", unauth, withToken(func(*Env) string { return "zz9zz9.0123456789abcdef" }), good),
		certCase("stored token id, wrong secret", unauth, withToken(func(e *Env) string { return e.tokens.valid[:7] + "0123456789abcdef" }), good),
		certCase("static token id, wrong secret", unauth, withToken(func(e *Env) string { return e.static[:7] + "zzzzzzzzzzzzzzzz" }), good),
		certCase("expired token", unauth, withToken(func(e *Env) string { return e.tokens.expired }), good),
		certCase("revoked token", unauth, withToken(func(e *Env) string { return e.tokens.revoked }), good),
		certCase("used-up single-use token", unauth, withToken(func(e *Env) string { return e.tokens.usedUp }), good),
		certCase("CSR with a bad signature", invalid, valid, badSignature),
		certCase("CSR asking for CA:TRUE", invalid, valid, caRequest),
		certCaseAt("CSR with Organization os:admin: issued without it", codes.OK, withToken(staticToken), orgAdmin),
		certCase("CSR with a wildcard DNS SAN", invalid, valid, csrWildcard),
		certCase("CSR with a wildcard common name", invalid, valid, csrWildCN),
		certCase("CSR with an e-mail SAN", invalid, valid, csrEmail),
		certCase("CSR with a URI SAN", invalid, valid, csrURI),
		certCase("CSR with an unspecified IP SAN", invalid, valid, csrUnspecIP),
		certCase("CSR with a DNS SAN outside the token's allow-list", invalid, withToken(func(e *Env) string { return e.tokens.restricted }), csrOutside),
		certCase("CSR with an IP SAN outside the token's allow-list", invalid, withToken(func(e *Env) string { return e.tokens.restricted }), csrOutsideIP),
		certCase(fmt.Sprintf("CSR with %d SANs", ca.MaxSANs+1), invalid, valid, manySANs(ca.MaxSANs+1)),
		certCase("CSR with an RSA-1024 key", invalid, valid, csrWithKey(rsa1024)),
		certCase("CSR with a P-224 key", invalid, valid, csrWithKey(p224)),
		certCase("garbage bytes as CSR", invalid, valid, bytesOf([]byte("\x00\x01conformance garbage\xff"))),
		certCase("empty CSR", invalid, valid, bytesOf(nil)),
		certCase("CSR just over 64 KiB", invalid, valid, oversized(ca.MaxPEMSize)),
		certCase("CSR of 10 MB", codes.ResourceExhausted, valid, oversized(10<<20)),
		raceCase(),
		rateLimitCase(),
	}
}
