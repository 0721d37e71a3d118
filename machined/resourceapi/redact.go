package resourceapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/resourcetypes"
)

// RedactedValue replaces every secret of the machine config.
const RedactedValue = "******"

// secretKeyWords mark a config field as secret by its name: keys, tokens,
// secrets and passwords, whatever field a later version of the config adds
// under such a name.
var secretKeyWords = []string{"key", "token", "secret", "password"}

// tokenLike matches a bootstrap token anywhere in a value.
var tokenLike = regexp.MustCompile(`[a-z0-9]{6}\.[a-z0-9]{16}`)

// SetMachineConfig serves cfg twice, its secrets redacted in both:
// MachineConfigs.aegis.dev/v1alpha1 holds the whole Aegis document (see
// Redact), MachineConfigs.config.talos.dev/v1alpha1 its Talos view (see
// talosconfig.go). A view that cannot be made without a secret is not
// served at all: the resource is removed rather than risk one.
func (s *State) SetMachineConfig(cfg *certs.MachineConfig) error {
	return errors.Join(s.setAegisConfig(cfg), s.setTalosView(cfg))
}

func (s *State) setAegisConfig(cfg *certs.MachineConfig) error {
	document, err := cfg.Marshal()
	if err != nil {
		return errors.Join(fmt.Errorf("resourceapi: machine config not served: %w", err), s.keep(resourcetypes.NamespaceName, resourcetypes.MachineConfigType, nil))
	}

	doc, paths, err := Redact(document)
	if err != nil {
		return errors.Join(fmt.Errorf("%w (machine config not served)", err), s.keep(resourcetypes.NamespaceName, resourcetypes.MachineConfigType, nil))
	}

	return set(s, resourcetypes.NewMachineConfig(), func(r *resourcetypes.MachineConfig) {
		*r.TypedSpec() = resourcetypes.MachineConfigSpec{Document: string(doc), Redacted: paths}
	})
}

func (s *State) setTalosView(cfg *certs.MachineConfig) error {
	view, err := talosView(cfg)
	if err == nil {
		err = s.setTalosConfig(view)
	}

	if err != nil {
		return errors.Join(fmt.Errorf("%w (Talos machine config not served)", err), s.keep(talosconfig.NamespaceName, talosconfig.MachineConfigType, nil))
	}

	return nil
}

// Redact returns a YAML document with the value of every secret field
// replaced by RedactedValue, and the paths it replaced. A field is secret
// if its name holds one of secretKeyWords, or if its value is, or
// base64-encodes, a private key or a bootstrap token: a secret under an
// unexpected name is caught by what it looks like.
func Redact(document []byte) ([]byte, []string, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(document, &root); err != nil {
		return nil, nil, fmt.Errorf("resourceapi: machine config: %w", err)
	}

	var paths []string

	redactNode(&root, "", false, &paths)

	var buf bytes.Buffer

	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)

	if err := enc.Encode(&root); err != nil {
		return nil, nil, fmt.Errorf("resourceapi: machine config: %w", err)
	}

	return buf.Bytes(), paths, nil
}

func redactNode(n *yaml.Node, path string, secret bool, paths *[]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			redactNode(c, path, secret, paths)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			redactNode(n.Content[i+1], path+"."+name, secret || secretName(name), paths)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			redactNode(c, fmt.Sprintf("%s[%d]", path, i), secret, paths)
		}
	case yaml.AliasNode:
		// An alias repeats what its anchor holds; it is cut off rather
		// than followed.
		n.Kind, n.Tag, n.Value, n.Alias = yaml.ScalarNode, "!!str", RedactedValue, nil
		*paths = append(*paths, strings.TrimPrefix(path, "."))
	case yaml.ScalarNode:
		if n.Value != "" && (secret || secretValue(n.Value)) {
			n.Tag, n.Value, n.Style = "!!str", RedactedValue, 0
			*paths = append(*paths, strings.TrimPrefix(path, "."))
		}
	}
}

func secretName(name string) bool {
	lower := strings.ToLower(name)
	for _, w := range secretKeyWords {
		if strings.Contains(lower, w) {
			return true
		}
	}

	return false
}

func secretValue(v string) bool {
	if looksSecret(v) {
		return true
	}

	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))

	return err == nil && looksSecret(string(decoded))
}

func looksSecret(v string) bool {
	return strings.Contains(v, "PRIVATE KEY") || tokenLike.MatchString(v)
}
