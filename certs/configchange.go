package certs

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// ChangeClass says what it takes to put a changed field of the machine
// config in effect.
type ChangeClass int

// Change classes, from the least to the most disruptive.
const (
	// ChangeLive fields are applied by the running node without a reboot.
	ChangeLive ChangeClass = iota
	// ChangeReboot fields take effect at the next boot.
	ChangeReboot
	// ChangeIdentity fields make the node another node (its role, its
	// cluster, its CA): never changed by applying a config.
	ChangeIdentity
)

// changeClasses classifies field paths by prefix; the longest prefix that
// matches wins, and a path no prefix matches needs a reboot. The live ones
// are those machined re-applies (machined/node/apply.go); the identity ones
// are refused: a node that turned from control plane to worker, joined
// another cluster or swapped its CA outright would lock itself and its
// peers out (a CA changes through acceptedCAs, by rotation), and its
// listen address is where machined's own probes and its peers find it.
var changeClasses = map[string]ChangeClass{
	"machine.acceptedCAs":    ChangeLive,
	"machine.token":          ChangeLive,
	"machine.previousTokens": ChangeLive,
	"machine.time":           ChangeLive,
	"cluster.workerSANs":     ChangeLive,
	// The accepted etcd CAs apply live, with a rolling restart of etcd;
	// cluster.etcd.ca changes only by rotation (CheckEtcdCAChange).
	"cluster.etcd.acceptedCAs": ChangeLive,
	"machine.type":             ChangeIdentity,
	"machine.ca":               ChangeIdentity,
	"cluster.name":             ChangeIdentity,
	"cluster.etcd.ca":          ChangeIdentity,
	"cluster.etcd.disabled":    ChangeIdentity,
}

// ClassOf returns the class of a changed field path.
func ClassOf(path string) ChangeClass {
	best, class := -1, ChangeReboot

	for prefix, c := range changeClasses {
		if (path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"[")) && len(prefix) > best {
			best, class = len(prefix), c
		}
	}

	return class
}

// ChangedFields returns the paths of the fields that differ between two
// configs, sorted: a scalar or a list whole ("machine.time.servers"), a
// mapping by its keys. Secrets are compared but never shown.
func ChangedFields(old, updated *MachineConfig) ([]string, error) {
	a, err := toTree(old)
	if err != nil {
		return nil, err
	}

	b, err := toTree(updated)
	if err != nil {
		return nil, err
	}

	var out []string

	walkChanges("", a, b, &out)
	slices.Sort(out)

	return out, nil
}

func toTree(c *MachineConfig) (map[string]any, error) {
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}

	tree := map[string]any{}
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("certs: re-reading a config: %w", err)
	}

	return tree, nil
}

func walkChanges(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)

	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, path)
		}

		return
	}

	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}

	for k := range bm {
		keys[k] = true
	}

	for k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}

		walkChanges(p, am[k], bm[k], out)
	}
}

// RedactedMarker stands in for a secret in a config shown to people.
const RedactedMarker = "******"

// Redacted returns the config as YAML with its secrets (the CA keys, the
// token, the previous tokens) replaced by RedactedMarker; it does not
// parse back.
func (c *MachineConfig) Redacted() ([]byte, error) {
	tree, err := toTree(c)
	if err != nil {
		return nil, err
	}

	redact := func(m map[string]any, keys ...string) {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				m[k] = RedactedMarker
			}
		}
	}

	if m, ok := tree["machine"].(map[string]any); ok {
		redact(m, "token")

		if prev, ok := m["previousTokens"].([]any); ok {
			for _, p := range prev {
				if p, ok := p.(map[string]any); ok {
					redact(p, "token")
				}
			}
		}

		if ca, ok := m["ca"].(map[string]any); ok {
			redact(ca, "key")
		}
	}

	if cl, ok := tree["cluster"].(map[string]any); ok {
		if e, ok := cl["etcd"].(map[string]any); ok {
			if ca, ok := e["ca"].(map[string]any); ok {
				redact(ca, "key")
			}
		}
	}

	return yaml.Marshal(tree)
}
