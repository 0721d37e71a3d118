// Package certs holds the documents an operator handles (the secrets bundle,
// the machine config and the client config) and the client certificates made
// from them.
package certs

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/atomicfile"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/token"
)

// Sizes of the random secrets in a bundle, as Talos makes them.
const (
	clusterIDSize     = 32
	clusterSecretSize = 32
	encryptionKeySize = 32
)

// Bundle is the cluster's secrets, in the layout of Talos's secrets.yaml so
// that either tool reads the other's file.
type Bundle struct {
	Cluster    *ClusterSecrets `yaml:"cluster"`
	Secrets    *Secrets        `yaml:"secrets"`
	TrustdInfo *TrustdInfo     `yaml:"trustdinfo"`
	Certs      *BundleCerts    `yaml:"certs"`
}

// ClusterSecrets identifies the cluster.
type ClusterSecrets struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
}

// Secrets are the cluster's shared secrets. Exactly one of the two
// encryption secrets is set; Aegis generates secretbox, older Talos bundles
// carry AES-CBC.
type Secrets struct {
	BootstrapToken            string `yaml:"bootstraptoken"`
	AESCBCEncryptionSecret    string `yaml:"aescbcencryptionsecret,omitempty"`
	SecretboxEncryptionSecret string `yaml:"secretboxencryptionsecret,omitempty"`
}

// TrustdInfo is the token nodes present to trustd.
type TrustdInfo struct {
	Token string `yaml:"token"`
}

// BundleCerts are the cluster's CAs and the service-account key.
type BundleCerts struct {
	Etcd              *CertAndKey `yaml:"etcd"`
	K8s               *CertAndKey `yaml:"k8s"`
	K8sAggregator     *CertAndKey `yaml:"k8saggregator"`
	K8sServiceAccount *KeyOnly    `yaml:"k8sserviceaccount"`
	OS                *CertAndKey `yaml:"os"`
}

// CertAndKey is a PEM certificate and, where the holder may sign, its key.
type CertAndKey struct {
	Crt Base64PEM `yaml:"crt"`
	Key Base64PEM `yaml:"key,omitempty"`
}

// KeyOnly is a PEM private key.
type KeyOnly struct {
	Key Base64PEM `yaml:"key"`
}

// BundleOptions controls GenerateBundle. The zero value is usable.
type BundleOptions struct {
	// OSKeyType is the key type of the OS CA, the root of trust for the Aegis
	// API. Zero means Ed25519, as Talos.
	OSKeyType ca.KeyType
	// Clock starts the CAs' validity. Nil means the system clock.
	Clock ca.Clock
	// Rand is the source of secrets, tokens and serials. Nil means crypto/rand.
	Rand io.Reader
}

// GenerateBundle creates a new secrets bundle: the OS CA of OSKeyType, the
// etcd, Kubernetes and aggregator CAs and the service-account key as ECDSA
// P-256 (as Talos makes them), two tokens and the cluster secrets.
func GenerateBundle(opts BundleOptions) (*Bundle, error) {
	opts.Rand = defaults.Rand(opts.Rand)

	newCA := func(kt ca.KeyType, org, cn string) (*CertAndKey, error) {
		c, err := ca.Generate(ca.Config{KeyType: kt, Organization: org, CommonName: cn, Clock: opts.Clock, Rand: opts.Rand})
		if err != nil {
			return nil, err
		}

		return &CertAndKey{Crt: c.CertPEM, Key: c.KeyPEM}, nil
	}

	certs := &BundleCerts{}

	var err error

	for _, step := range []struct {
		dst     **CertAndKey
		kt      ca.KeyType
		org, cn string
	}{
		{&certs.Etcd, ca.ECDSAP256, "etcd", ""},
		{&certs.K8s, ca.ECDSAP256, "kubernetes", ""},
		{&certs.K8sAggregator, ca.ECDSAP256, "", "front-proxy"},
		{&certs.OS, opts.OSKeyType, "aegis", "aegis OS CA"},
	} {
		if *step.dst, err = newCA(step.kt, step.org, step.cn); err != nil {
			return nil, err
		}
	}

	saKey, err := ca.GenerateKey(ca.ECDSAP256, opts.Rand)
	if err != nil {
		return nil, err
	}

	saPEM, err := ca.EncodeKey(saKey)
	if err != nil {
		return nil, err
	}

	certs.K8sServiceAccount = &KeyOnly{Key: saPEM}

	return newBundle(opts.Rand, certs)
}

func newBundle(r io.Reader, certs *BundleCerts) (*Bundle, error) {
	bootstrap, err := token.Generate(r)
	if err != nil {
		return nil, err
	}

	trustd, err := token.Generate(r)
	if err != nil {
		return nil, err
	}

	id, err := randomBase64(r, clusterIDSize, base64.URLEncoding)
	if err != nil {
		return nil, err
	}

	secret, err := randomBase64(r, clusterSecretSize, base64.StdEncoding)
	if err != nil {
		return nil, err
	}

	secretbox, err := randomBase64(r, encryptionKeySize, base64.StdEncoding)
	if err != nil {
		return nil, err
	}

	return &Bundle{
		Cluster:    &ClusterSecrets{ID: id, Secret: secret},
		Secrets:    &Secrets{BootstrapToken: bootstrap.Reveal(), SecretboxEncryptionSecret: secretbox},
		TrustdInfo: &TrustdInfo{Token: trustd.Reveal()},
		Certs:      certs,
	}, nil
}

// ParseBundle decodes and validates a bundle; now is the time the CAs must be valid at.
func ParseBundle(what string, data []byte, now time.Time) (*Bundle, error) {
	var b Bundle
	if err := decodeStrict(what, data, &b); err != nil {
		return nil, err
	}

	if err := b.Validate(what, now); err != nil {
		return nil, err
	}

	return &b, nil
}

// LoadBundle reads and validates the bundle at path.
func LoadBundle(path string, now time.Time) (*Bundle, error) {
	data, err := readDocument(path)
	if err != nil {
		return nil, err
	}

	return ParseBundle(path, data, now)
}

// Marshal encodes the bundle as YAML.
func (b *Bundle) Marshal() ([]byte, error) { return encodeYAML(b) }

// Save writes the bundle to path with mode 0600; an existing file is kept
// unless overwrite is set.
func (b *Bundle) Save(path string, overwrite bool) error {
	data, err := b.Marshal()
	if err != nil {
		return err
	}

	return atomicfile.Write(path, data, 0o600, atomicfile.Options{Overwrite: overwrite})
}

// OSCA returns the OS CA, the issuer of every Aegis API certificate.
func (b *Bundle) OSCA(now time.Time) (*ca.CA, error) {
	if b.Certs == nil || b.Certs.OS == nil {
		return nil, fmt.Errorf("certs: bundle has no OS CA")
	}

	return ca.Parse(b.Certs.OS.Crt, b.Certs.OS.Key, now)
}

// Validate checks every field and reports all problems at once.
func (b *Bundle) Validate(what string, now time.Time) error {
	var ps problems

	if b.Cluster == nil {
		ps.add("cluster", "required")
	} else {
		requireBase64(&ps, "cluster.id", b.Cluster.ID, base64.URLEncoding)
		requireBase64(&ps, "cluster.secret", b.Cluster.Secret, base64.StdEncoding)
	}

	if b.Secrets == nil {
		ps.add("secrets", "required")
	} else {
		checkToken(&ps, "secrets.bootstraptoken", b.Secrets.BootstrapToken)

		switch s := b.Secrets; {
		case s.AESCBCEncryptionSecret == "" && s.SecretboxEncryptionSecret == "":
			ps.add("secrets.secretboxencryptionsecret", "required (or secrets.aescbcencryptionsecret)")
		case s.AESCBCEncryptionSecret != "" && s.SecretboxEncryptionSecret != "":
			ps.add("secrets", "only one of secretboxencryptionsecret and aescbcencryptionsecret may be set")
		case s.SecretboxEncryptionSecret != "":
			requireBase64(&ps, "secrets.secretboxencryptionsecret", s.SecretboxEncryptionSecret, base64.StdEncoding)
		default:
			requireBase64(&ps, "secrets.aescbcencryptionsecret", s.AESCBCEncryptionSecret, base64.StdEncoding)
		}
	}

	if b.TrustdInfo == nil {
		ps.add("trustdinfo", "required")
	} else {
		checkToken(&ps, "trustdinfo.token", b.TrustdInfo.Token)
	}

	b.validateCerts(&ps, now)

	return ps.err(what)
}

func (b *Bundle) validateCerts(ps *problems, now time.Time) {
	if b.Certs == nil {
		ps.add("certs", "required")

		return
	}

	for _, c := range []struct {
		path string
		pair *CertAndKey
	}{
		{"certs.etcd", b.Certs.Etcd},
		{"certs.k8s", b.Certs.K8s},
		{"certs.k8saggregator", b.Certs.K8sAggregator},
		{"certs.os", b.Certs.OS},
	} {
		checkCAPair(ps, c.path, c.pair, true, now)
	}

	switch sa := b.Certs.K8sServiceAccount; {
	case sa == nil || len(sa.Key) == 0:
		ps.add("certs.k8sserviceaccount.key", "required")
	default:
		_, err := ca.ParseKey(sa.Key)
		ps.addErr("certs.k8sserviceaccount.key", err)
	}
}

// checkCAPair checks a CA certificate and, when needKey is set, its key.
// The certificate is checked first, so a later failure is the key's.
func checkCAPair(ps *problems, path string, pair *CertAndKey, needKey bool, now time.Time) {
	if pair == nil || len(pair.Crt) == 0 {
		ps.add(path+".crt", "required")

		return
	}

	cert, err := ca.ParseCertificate(pair.Crt)
	if err == nil {
		err = ca.CheckCACertificate(cert, now)
	}

	if err != nil {
		ps.addErr(path+".crt", err)

		return
	}

	switch {
	case needKey && len(pair.Key) == 0:
		ps.add(path+".key", "required")
	case len(pair.Key) > 0:
		_, err = ca.Parse(pair.Crt, pair.Key, now)
		ps.addErr(path+".key", err)
	}
}

func checkToken(ps *problems, path, value string) {
	if value == "" {
		ps.add(path, "required")

		return
	}

	if _, err := token.Parse(value); err != nil {
		ps.add(path, "malformed token (want [a-z0-9]{6}.[a-z0-9]{16})")
	}
}

func requireBase64(ps *problems, path, value string, enc *base64.Encoding) {
	if value == "" {
		ps.add(path, "required")

		return
	}

	if _, err := enc.DecodeString(value); err != nil {
		ps.add(path, "not base64")
	}
}

func randomBase64(r io.Reader, n int, enc *base64.Encoding) (string, error) {
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", fmt.Errorf("certs: reading randomness: %w", err)
	}

	return enc.EncodeToString(buf), nil
}

func readDocument(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}

	if st.Size() > MaxDocumentSize {
		return nil, &ValidationError{What: path, Problems: []Problem{{Message: fmt.Sprintf("file is %d bytes, limit %d", st.Size(), MaxDocumentSize)}}}
	}

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}

	return data, nil
}
