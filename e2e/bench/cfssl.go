package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/aegis-os/aegis/ca"
)

// cfsslServer is cfssl's own signing server, `cfssl serve`, with the same
// CA as trustd, answering on its authenticated signing endpoint over TLS.
type cfsslServer struct {
	proc *process
	url  string
	// body is the authsign request: the CSR under the server profile, with
	// its HMAC token. It is the same for every call, as trustd's is.
	body []byte
	// one keeps one connection (HTTP/1.1 keep-alive, as cfssl's own remote
	// client does); fresh makes a new TLS connection per call.
	one, fresh *http.Client
	// tls is the clients' TLS configuration.
	tls *tls.Config
	// db is the certificate database's file; "" for a server without one.
	db string
	// sent counts the calls made, answered those answered with a
	// certificate: the database must hold at least answered rows and at
	// most sent (a call cut by the end of a timed case may be committed
	// without its answer being read).
	sent, answered atomic.Int64
}

// cfsslProfile is the signing profile of the requests: a 24-hour server
// certificate, as trustd issues.
const cfsslProfile = "server"

// Names of the two cfssl servers in the figures.
const (
	serverCfssl   = "cfssl serve"
	serverCfsslDB = "cfssl serve with certificate database"
)

// startCfssl writes cfssl's files (CA, TLS pair, config with an auth key)
// and runs `cfssl serve` on ip; withDB gives it a new sqlite certificate
// database, in which it records every certificate it signs.
func (r *run) startCfssl(ctx context.Context, s *issueSetup, ip string, withDB bool) (*cfsslServer, error) {
	authKey := make([]byte, 32)
	if _, err := rand.Read(authKey); err != nil {
		return nil, err
	}

	name, dir := serverCfssl, filepath.Join(s.dir, "cfssl")
	if withDB {
		name, dir = serverCfsslDB, filepath.Join(s.dir, "cfssl-db")
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	args, tlsCfg, err := writeCfsslFiles(s, dir, ip, authKey)
	if err != nil {
		return nil, err
	}

	var db string

	if withDB {
		db = filepath.Join(dir, "certdb.sqlite")

		dbConfig := filepath.Join(dir, "certdb.json")
		if err = createCertDB(ctx, r.cfg.CfsslMigrations, db, dbConfig); err != nil {
			return nil, err
		}

		args = append(args, "-db-config", dbConfig)
	}

	body, err := authSignBody(s.csrPEM, authKey)
	if err != nil {
		return nil, err
	}

	addr := net.JoinHostPort(ip, strconv.Itoa(CfsslPort))
	c := &cfsslServer{
		url:   "https://" + addr + "/api/v1/cfssl/authsign",
		db:    db,
		body:  body,
		tls:   tlsCfg,
		one:   &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 1}},
		fresh: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}},
	}

	// Warnings and errors only: at its default level cfssl logs three
	// lines per request. Without them the reference is at its fastest,
	// while trustd still writes its audit record per call.
	c.proc, err = r.start(name, filepath.Join(dir, "cfssl.log"), filepath.Join(r.cfg.BinDir, "cfssl"),
		append([]string{"serve", "-address", ip, "-port", strconv.Itoa(CfsslPort), "-loglevel", "2"}, args...)...)
	if err != nil {
		return nil, err
	}

	if err = c.proc.waitListening(ctx, addr); err != nil {
		return nil, errors.Join(err, c.close())
	}

	if err = untilOK(ctx, c.callOne, c.proc); err != nil {
		return nil, errors.Join(err, c.close())
	}

	return c, nil
}

// writeCfsslFiles writes into dir the CA pair, a TLS server pair for ip
// from the same CA, and the signing config; it returns serve's flags naming
// them and the client's TLS config.
func writeCfsslFiles(s *issueSetup, dir, ip string, authKey []byte) ([]string, *tls.Config, error) {
	tlsCert, tlsKey, err := serverPair(s.ca, ip)
	if err != nil {
		return nil, nil, err
	}

	profile := map[string]any{"usages": []string{"digital signature", "server auth"}, "expiry": "24h", "auth_key": "bench"}
	config, err := json.MarshalIndent(map[string]any{
		"signing":   map[string]any{"default": profile, "profiles": map[string]any{cfsslProfile: profile}},
		"auth_keys": map[string]any{"bench": map[string]string{"type": "standard", "key": hex.EncodeToString(authKey)}},
	}, "", "  ")
	if err != nil {
		return nil, nil, err
	}

	files := []struct {
		flag, name string
		data       []byte
	}{
		{"-ca", "ca.pem", s.ca.CertPEM}, {"-ca-key", "ca-key.pem", s.ca.KeyPEM},
		{"-tls-cert", "tls.pem", tlsCert}, {"-tls-key", "tls-key.pem", tlsKey},
		{"-config", "cfssl.json", config},
	}

	var args []string

	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			return nil, nil, err
		}

		args = append(args, f.flag, path)
	}

	pool, err := ca.NewAcceptedSet(s.ca.Cert.NotBefore, s.ca.Cert)
	if err != nil {
		return nil, nil, err
	}

	return args, &tls.Config{RootCAs: pool.Pool(), ServerName: ip, MinVersion: tls.VersionTLS13}, nil
}

// serverPair issues a server certificate for ip from authority, with a new
// key of the CA's type.
func serverPair(authority *ca.CA, ip string) (certPEM, keyPEM []byte, err error) {
	kt, err := ca.KeyTypeOf(authority.Cert.PublicKey)
	if err != nil {
		return nil, nil, err
	}

	key, err := ca.GenerateKey(kt, nil)
	if err != nil {
		return nil, nil, err
	}

	csrPEM, err := ca.NewCSR(key, ip, []string{ip})
	if err != nil {
		return nil, nil, err
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}

	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: authority})
	if err != nil {
		return nil, nil, err
	}

	issued, err := iss.Issue(ca.Request{CSR: csr, Profile: ca.ProfileServer})
	if err != nil {
		return nil, nil, err
	}

	keyPEM, err = ca.EncodeKey(key)

	return issued.PEM, keyPEM, err
}

// authSignBody is an authsign request: the sign request, and its
// HMAC-SHA256 under the auth key as the token.
func authSignBody(csrPEM, authKey []byte) ([]byte, error) {
	req, err := json.Marshal(map[string]string{"certificate_request": string(csrPEM), "profile": cfsslProfile})
	if err != nil {
		return nil, err
	}

	mac := hmac.New(sha256.New, authKey)
	mac.Write(req)

	// []byte fields go out as base64, as cfssl's own client sends them.
	return json.Marshal(struct {
		Token   []byte `json:"token"`
		Request []byte `json:"request"`
	}{mac.Sum(nil), req})
}

func (c *cfsslServer) callOne(ctx context.Context) error { return c.call(ctx, c.one) }
func (c *cfsslServer) callNew(ctx context.Context) error { return c.call(ctx, c.fresh) }

func (c *cfsslServer) call(ctx context.Context, hc *http.Client) error {
	c.sent.Add(1)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return err
	}

	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read to the end below

	var out struct {
		Success bool `json:"success"`
		Result  struct {
			Certificate string `json:"certificate"`
		} `json:"result"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}

	err = json.NewDecoder(resp.Body).Decode(&out)
	_, _ = io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained so the connection is reused

	switch {
	case err != nil:
		return fmt.Errorf("cfssl: %s: %w", resp.Status, err)
	case !out.Success || out.Result.Certificate == "":
		return fmt.Errorf("cfssl: %s: %v", resp.Status, out.Errors)
	}

	c.answered.Add(1)

	return nil
}

// close closes the clients' connections and stops the server.
func (c *cfsslServer) close() error {
	c.one.CloseIdleConnections()

	return c.proc.stop()
}
