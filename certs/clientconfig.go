package certs

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/aegis-os/aegis/internal/atomicfile"
)

// EnvClientConfig names the environment variable holding the client config path.
const EnvClientConfig = "AEGISCONFIG"

// ClientConfig is the operator's client config, in the layout of Talos's
// talosconfig: a current context and named contexts, each with endpoints,
// default nodes and the credentials to reach them.
type ClientConfig struct {
	Context  string                    `yaml:"context"`
	Contexts map[string]*ClientContext `yaml:"contexts"`
	// Unknown holds the fields Aegis does not read, kept so that a file
	// that other tools write too survives a rewrite.
	Unknown map[string]any `yaml:",inline"`
}

// ClientContext is one set of endpoints and credentials.
type ClientContext struct {
	Endpoints []string  `yaml:"endpoints"`
	Nodes     []string  `yaml:"nodes,omitempty"`
	CA        Base64PEM `yaml:"ca,omitempty"`
	Crt       Base64PEM `yaml:"crt,omitempty"`
	Key       Base64PEM `yaml:"key,omitempty"`
	Cluster   string    `yaml:"cluster,omitempty"`
	// Unknown holds the fields of other tools that share the talosconfig
	// layout (Omni's auth, for one): ignored, and kept when the file is
	// rewritten.
	Unknown map[string]any `yaml:",inline"`
}

// Rename records a context renamed during a merge to avoid a clash.
type Rename struct {
	From, To string
}

// EnvTalosConfig names Talos's variable for the talosconfig path, read
// when $AEGISCONFIG is not set: the two files share a layout.
const EnvTalosConfig = "TALOSCONFIG"

// DefaultClientConfigPath is $AEGISCONFIG, else $TALOSCONFIG, else
// ~/.aegis/config.
func DefaultClientConfigPath() (string, error) {
	for _, env := range []string{EnvClientConfig, EnvTalosConfig} {
		if p := os.Getenv(env); p != "" {
			return p, nil
		}
	}

	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("certs: no client config path: set $%s: %w", EnvClientConfig, err)
	}

	return filepath.Join(home, ".aegis", "config"), nil
}

// ParseClientConfig decodes a client config and validates it. It is strict
// about the fields Aegis reads (types, duplicates, base64) and keeps the
// others, unread, in Unknown.
func ParseClientConfig(what string, data []byte) (*ClientConfig, error) {
	var c ClientConfig
	if err := decodeStrict(what, data, &c); err != nil {
		return nil, err
	}

	if err := c.Validate(what); err != nil {
		return nil, err
	}

	return &c, nil
}

// LoadClientConfig reads the client config at path.
func LoadClientConfig(path string) (*ClientConfig, error) {
	data, err := readDocument(path)
	if err != nil {
		return nil, err
	}

	return ParseClientConfig(path, data)
}

// LoadOrNewClientConfig reads the client config at path, or returns an empty
// one if there is no file yet.
func LoadOrNewClientConfig(path string) (*ClientConfig, error) {
	c, err := LoadClientConfig(path)
	if errors.Is(err, os.ErrNotExist) {
		return &ClientConfig{Contexts: map[string]*ClientContext{}}, nil
	}

	return c, err
}

// Validate checks that the current context exists and every context is usable.
func (c *ClientConfig) Validate(what string) error {
	var ps problems

	if c.Context != "" {
		if _, ok := c.Contexts[c.Context]; !ok {
			ps.add("context", "%q names no context", c.Context)
		}
	}

	for _, name := range slices.Sorted(maps.Keys(c.Contexts)) {
		path := "contexts." + name

		ctx := c.Contexts[name]
		if ctx == nil {
			ps.add(path, "empty context")

			continue
		}

		for i, ep := range ctx.Endpoints {
			if err := CheckHostPort(ep); err != nil {
				ps.add(index(path+".endpoints", i), "%v", err)
			}
		}

		for i, n := range ctx.Nodes {
			if err := CheckHostPort(n); err != nil {
				ps.add(index(path+".nodes", i), "%v", err)
			}
		}

		if (len(ctx.Crt) == 0) != (len(ctx.Key) == 0) {
			ps.add(path, "crt and key go together")
		}
	}

	return ps.err(what)
}

// Marshal encodes the config as YAML.
func (c *ClientConfig) Marshal() ([]byte, error) { return encodeYAML(c) }

// Save writes the config atomically with mode 0600, replacing any file at
// path: a client config is rewritten in place by merges and renewals.
func (c *ClientConfig) Save(path string) error {
	data, err := c.Marshal()
	if err != nil {
		return err
	}

	return atomicfile.Write(path, data, 0o600, atomicfile.Options{Overwrite: true})
}

// Current returns the current context.
func (c *ClientConfig) Current() (string, *ClientContext, error) {
	if c.Context == "" {
		return "", nil, errors.New("certs: client config has no current context")
	}

	ctx, ok := c.Contexts[c.Context]
	if !ok {
		return "", nil, fmt.Errorf("certs: current context %q does not exist", c.Context)
	}

	return c.Context, ctx, nil
}

// Merge adds the contexts of other. A context whose name is taken is added
// under a new name ("name-1", "name-2", …) unless force is set, in which case
// it replaces the old one. The current context becomes other's current
// context (under its final name). It returns the renames it made.
func (c *ClientConfig) Merge(other *ClientConfig, force bool) []Rename {
	if c.Contexts == nil {
		c.Contexts = map[string]*ClientContext{}
	}

	var renames []Rename

	for _, name := range slices.Sorted(maps.Keys(other.Contexts)) {
		final := name

		if _, taken := c.Contexts[name]; taken && !force {
			final = c.freeName(name)
			renames = append(renames, Rename{From: name, To: final})
		}

		c.Contexts[final] = other.Contexts[name]

		if name == other.Context {
			c.Context = final
		}
	}

	return renames
}

func (c *ClientConfig) freeName(name string) string {
	for i := 1; ; i++ {
		candidate := name + "-" + strconv.Itoa(i)
		if _, taken := c.Contexts[candidate]; !taken {
			return candidate
		}
	}
}

// ErrCredentialsChanged is returned when a context's credentials are not the
// ones a renewal started from: something else replaced them meanwhile.
var ErrCredentialsChanged = errors.New("certs: the context's credentials changed during the renewal")

// ReplaceCredentials puts a renewed certificate and its key into context
// name, if the context still holds oldCrt; otherwise it changes nothing and
// returns ErrCredentialsChanged. The context's CAs stay as they are: a
// renewal never changes what a client trusts, only a CA rotation does.
func (c *ClientConfig) ReplaceCredentials(name string, oldCrt, crt, key []byte) error {
	ctx, ok := c.Contexts[name]
	if !ok || ctx == nil {
		return fmt.Errorf("renewal: no context %q", name)
	}

	if !bytes.Equal(ctx.Crt, oldCrt) {
		return ErrCredentialsChanged
	}

	ctx.Crt, ctx.Key = crt, key

	return nil
}

// ReplaceCredentialsInFile rewrites the client config at path as it is on
// disk now, with only context name's certificate and key replaced as
// ReplaceCredentials does (an error of which names the path), and returns
// the context as written. Other contexts, changed by someone else since the
// renewal began, are kept.
func ReplaceCredentialsInFile(path, name string, oldCrt, crt, key []byte) (*ClientContext, error) {
	cfg, err := LoadClientConfig(path)
	if err != nil {
		return nil, err
	}

	if err = cfg.ReplaceCredentials(name, oldCrt, crt, key); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	if err = cfg.Save(path); err != nil {
		return nil, err
	}

	return cfg.Contexts[name], nil
}
