package resourceapi_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/machined/resourceapi"
)

func yamlString(v any) (string, error) {
	b, err := yaml.Marshal(v)

	return string(b), err
}

func TestRedactHidesSecretsByNameAndByLook(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIO6FLHWmgcP80Jvgw0H7Yzy2460OeduX+TM0dlJiGwAR\n-----END PRIVATE KEY-----\n"
	crt := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	doc := `version: v1alpha1
machine:
    type: controlplane
    token: 82jdxc.83n71ipxg8b8lsuz
    ca:
        crt: ` + crt + `
        key: ` + base64.StdEncoding.EncodeToString([]byte(key)) + `
    note: 82jdxc.83n71ipxg8b8lsuz
    blob: ` + base64.StdEncoding.EncodeToString([]byte(key)) + `
    certSANs: [demo.example]
cluster:
    name: demo
    etcd:
        ca: {crt: ` + crt + `, key: abc}
    secretboxEncryptionSecret: c2VjcmV0
`

	out, paths, err := resourceapi.Redact([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}

	for _, secret := range []string{"82jdxc", base64.StdEncoding.EncodeToString([]byte(key))[:20], "abc", "c2VjcmV0"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("redacted config still holds %q:\n%s", secret, out)
		}
	}

	for _, kept := range []string{crt, "demo.example", "controlplane"} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("redacted config lost %q:\n%s", kept, out)
		}
	}

	want := "machine.token machine.ca.key machine.note machine.blob cluster.etcd.ca.key cluster.secretboxEncryptionSecret"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("paths = %s, want %s", got, want)
	}
}

func TestRedactRefusesWhatItCannotRead(t *testing.T) {
	if _, _, err := resourceapi.Redact([]byte("machine: [unclosed")); err == nil {
		t.Fatal("a config that does not parse was served")
	}
}
