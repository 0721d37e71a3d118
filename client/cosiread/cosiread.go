// Package cosiread reads resources from nodes' resource API (COSI's
// State, as talosctl get does): a kind resolved to its definition, the
// resources listed, got or watched, one node per call, and a resource
// turned into a plain document. Printing is the caller's. The package
// imports no server package; machined/resources is the node side.
package cosiread

import (
	"context"
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"go.yaml.in/yaml/v4"
)

// Query names the resources read on one node.
type Query struct {
	// Client reaches the node through the endpoint. Required.
	Client *client.Client
	// Node is routed to with `node` (the resource API is not fanned
	// out). "": the endpoint's own node.
	Node string
	// Kind is a type, its name or an alias, as 'get rd' lists them.
	// Required.
	Kind string
	// Namespace of the resources. "": the type's own.
	Namespace string
	// ID names one resource. "": every resource of the type.
	ID string
}

// Found is what Resolve found: the kind's definition and the namespace
// read.
type Found struct {
	Definition *meta.ResourceDefinition
	Namespace  resource.Namespace
}

func (q Query) context(ctx context.Context) context.Context {
	if q.Node != "" {
		return client.WithNode(ctx, q.Node)
	}

	return ctx
}

// Resolve finds the definition of q's kind on the node, and the
// namespace: q's, else the type's default.
func (q Query) Resolve(ctx context.Context) (Found, error) {
	ns := resource.Namespace(q.Namespace)

	rd, err := q.Client.ResolveResourceKind(q.context(ctx), &ns, q.Kind)
	if err != nil {
		return Found{}, err
	}

	return Found{Definition: rd, Namespace: ns}, nil
}

func (q Query) metadata(f Found) *resource.Metadata {
	md := resource.NewMetadata(f.Namespace, f.Definition.TypedSpec().Type, q.ID, resource.VersionUndefined)

	return &md
}

// Read returns the resource q.ID, or every resource of the kind, as the
// node serves them (specs are not decoded to Go types).
func (q Query) Read(ctx context.Context, f Found) ([]resource.Resource, error) {
	ctx, md, raw := q.context(ctx), q.metadata(f), state.WithSkipProtobufUnmarshal()

	if q.ID != "" {
		r, err := q.Client.COSI.Get(ctx, *md, state.WithGetUnmarshalOptions(raw))
		if err != nil {
			return nil, err
		}

		return []resource.Resource{r}, nil
	}

	list, err := q.Client.COSI.List(ctx, *md, state.WithListUnmarshalOptions(raw))
	if err != nil {
		return nil, err
	}

	return list.Items, nil
}

// Watch hands fn the resources (Created, for a kind; the one resource's
// current state, for an ID) and then every change, until ctx ends (nil)
// or the watch or fn fails (its error). fn is called from one goroutine.
func (q Query) Watch(ctx context.Context, f Found, fn func(state.EventType, resource.Resource) error) error {
	ctx, cancel := context.WithCancel(q.context(ctx))
	defer cancel()

	events := make(chan state.Event)
	md, raw := q.metadata(f), state.WithSkipProtobufUnmarshal()

	var err error
	if q.ID != "" {
		err = q.Client.COSI.Watch(ctx, md, events, state.WithWatchUnmarshalOptions(raw))
	} else {
		err = q.Client.COSI.WatchKind(ctx, md, events, state.WithBootstrapContents(true), state.WithWatchKindUnmarshalOptions(raw))
	}

	if err != nil {
		return err
	}

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			switch ev.Type {
			case state.Errored:
				if ctx.Err() != nil {
					return nil
				}

				return ev.Error
			case state.Bootstrapped, state.Noop:
				continue
			}

			if err := fn(ev.Type, ev.Resource); err != nil {
				return err
			}
		}
	}
}

// Document is r as a plain document: node (when not ""), metadata and
// spec as the node serves it.
func Document(node string, r resource.Resource) (map[string]any, error) {
	view, err := resource.MarshalYAML(r)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.Metadata().ID(), err)
	}

	out, err := yaml.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.Metadata().ID(), err)
	}

	var doc map[string]any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.Metadata().ID(), err)
	}

	if node != "" {
		doc["node"] = node
	}

	return doc, nil
}

// Column evaluates a definition's print column, a simple path such as
// {.status.ready} or {.aliases[:]}, on a document's spec; anything else
// is empty.
func Column(spec any, path string) string {
	path = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(path, "{."), "}"), "[:]", "")

	v := spec
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}

		v = m[key]
	}

	switch v := v.(type) {
	case nil:
		return ""
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}

		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(v)
	}
}
