package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd"
)

// raceClients is how many callers race for the single-use token.
const raceClients = 100

// raceCase: a single-use token presented by many callers at once, each
// from its own address over its own connection, all connected before the
// first call, issues exactly one certificate.
func raceCase() *Case {
	want := fmt.Sprintf("OK ×1, Unauthenticated ×%d", raceClients-1)

	return &Case{
		Group: "trustd", Name: fmt.Sprintf("single-use token raced by %d clients", raceClients), Expected: want, Issues: 1,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			skip, err := e.auditCount(ctx, e.Target)
			if err != nil {
				r.Problemf("reading the audit log: %v", err)
			}

			got, sources := e.race(ctx, r)

			e.checkRaceAudit(ctx, sources, skip, r)
			e.checkUses(ctx, e.tokens.race, 1, r)

			return got
		},
	}
}

// racer is one caller of the race.
type racer struct {
	source string
	conn   *grpc.ClientConn
	csr    []byte
	code   codes.Code
}

func (e *Env) race(ctx context.Context, r *Report) (string, []string) {
	racers := make([]*racer, raceClients)
	sources := make([]string, raceClients)

	for i := range racers {
		rc, err := e.newRacer(ctx)
		if err != nil {
			r.Problemf("preparing caller %d: %v", i, err)

			return "not run", nil
		}
		defer rc.conn.Close() //nolint:errcheck // closed with the case

		racers[i], sources[i] = rc, rc.source
	}

	start := make(chan struct{})

	var wg sync.WaitGroup

	md := withMetadata(ctx, wire.MetadataToken, e.tokens.race)

	for _, rc := range racers {
		wg.Go(func() {
			<-start

			_, err := securityapi.NewSecurityServiceClient(rc.conn).Certificate(md, &securityapi.CertificateRequest{Csr: rc.csr})
			rc.code = status.Code(err)
		})
	}

	close(start)
	wg.Wait()

	counts := map[codes.Code]int{}
	for _, rc := range racers {
		counts[rc.code]++
	}

	return describeCounts(counts), sources
}

// newRacer connects one caller and waits until its connection is ready,
// so the calls start together.
func (e *Env) newRacer(ctx context.Context) (*racer, error) {
	source, err := e.sources.take()
	if err != nil {
		return nil, err
	}

	csr, err := goodCSR(source)
	if err != nil {
		return nil, err
	}

	conn, err := e.trustdConn(e.Target, source)
	if err != nil {
		return nil, err
	}

	wait, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()

	conn.Connect()

	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(wait, st) {
			conn.Close() //nolint:errcheck // giving up on it

			return nil, fmt.Errorf("connection from %s not ready: %s", source, st)
		}
	}

	return &racer{source: source, conn: conn, csr: csr}, nil
}

// describeCounts names outcomes with their counts, OK first.
func describeCounts(counts map[codes.Code]int) string {
	keys := make([]codes.Code, 0, len(counts))
	for c := range counts {
		keys = append(keys, c)
	}

	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })

	parts := make([]string, len(keys))
	for i, c := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", c, counts[c])
	}

	return strings.Join(parts, ", ")
}

// checkRaceAudit requires one issued and the rest refused records from
// the racers' sources.
func (e *Env) checkRaceAudit(ctx context.Context, sources []string, skip int, r *Report) {
	from := map[string]bool{}
	for _, s := range sources {
		from[s] = true
	}

	issued, refused := 0, 0

	err := e.poll(ctx, auditWait, func() error {
		all, err := e.audit(ctx, e.Target)
		if err != nil {
			return err
		}

		issued, refused = 0, 0

		for _, rec := range all[min(skip, len(all)):] {
			switch {
			case !from[rec.str(auditSource)]:
			case rec.issued():
				issued++
			default:
				refused++
			}
		}

		if issued+refused < len(sources) {
			return fmt.Errorf("%d audit records from the racers, want %d", issued+refused, len(sources))
		}

		return nil
	})
	if err != nil {
		r.Problemf("%v", err)
	}

	if issued != 1 || refused != len(sources)-1 {
		r.Problemf("audit: %d issued and %d refused, want 1 and %d", issued, refused, len(sources)-1)
	}
}

// checkUses requires the stored token to show uses uses.
func (e *Env) checkUses(ctx context.Context, tok string, uses uint32, r *Report) {
	conn, err := e.admin(e.Target)
	if err != nil {
		r.Problemf("%v", err)

		return
	}

	resp, err := tokens.NewTokenServiceClient(conn).List(ctx, &tokens.ListRequest{})
	if err != nil {
		r.Problemf("listing tokens: %v", err)

		return
	}

	for _, l := range resp.GetMessages() {
		for _, t := range l.GetTokens() {
			if t.GetId() == tok[:6] && t.GetUses() != uses {
				r.Problemf("token %s shows %d uses, want %d", t.GetId(), t.GetUses(), uses)
			}
		}
	}
}

// rateLimitCase: a source that failed trustd.DefaultFailureBurst times in
// a row is refused with ResourceExhausted, even with a good token and CSR,
// before trustd reads the request.
func rateLimitCase() *Case {
	return &Case{
		Group: "trustd", Name: fmt.Sprintf("rate limit: good request after %d failures from one source", trustd.DefaultFailureBurst),
		Expected: codes.ResourceExhausted.String(),
		Run: func(ctx context.Context, e *Env, r *Report) string {
			source, err := e.sources.take()
			if err != nil {
				r.Problemf("%v", err)

				return "not run"
			}

			skip, _ := e.auditCount(ctx, e.Target)
			good, _ := goodCSR(source)

			var seen []string

			for range trustd.DefaultFailureBurst {
				_, err := e.certify(ctx, e.Target, source, []string{wire.MetadataToken, "conformance"}, good)
				seen = append(seen, codeOf(err))
			}

			for i, c := range seen {
				if c != codes.Unauthenticated.String() {
					r.Problemf("failure %d ended %s, want Unauthenticated (the limit struck early, or a refill came)", i+1, c)
				}
			}

			_, err = e.certify(ctx, e.Target, source, []string{wire.MetadataToken, e.static}, good)
			got := codeOf(err)
			seen = append(seen, got)

			// Only the first refusal of the source is written in full; the
			// others are counted in its summary (refusalCases).
			e.checkAudit(ctx, e.Target, source, skip, seen[:1], r)

			return got
		},
	}
}
