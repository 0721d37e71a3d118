package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/health"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// The documents -o json and -o yaml print for the commands whose output is
// not an API reply. JSON keys are camelCase as in the API replies; YAML has
// the same keys.

// contextDoc is one context of config contexts; it never holds credentials.
type contextDoc struct {
	Name      string   `json:"name"`
	Current   bool     `json:"current"`
	Endpoints []string `json:"endpoints"`
	Nodes     []string `json:"nodes"`
}

// contextInfoDoc is config info's context.
type contextInfoDoc struct {
	Context      string    `json:"context"`
	Endpoints    []string  `json:"endpoints"`
	Nodes        []string  `json:"nodes"`
	Roles        []string  `json:"roles"`
	Ignored      []string  `json:"ignoredOrganizations,omitempty"`
	Certificates []certDoc `json:"certificates"`
	OtherFields  []string  `json:"otherFields,omitempty"`
}

// certDoc is one certificate of a context.
type certDoc struct {
	What        string    `json:"what"`
	Subject     string    `json:"subject"`
	Key         string    `json:"key"`
	NotAfter    time.Time `json:"notAfter"`
	Expired     bool      `json:"expired"`
	Fingerprint string    `json:"fingerprint"`
}

// clusterDoc is cluster show's cluster.
type clusterDoc struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Network is loopback or netns; a netns cluster also has Bridge and
	// Gateway, and every node its Namespace.
	Network string    `json:"network"`
	Bridge  string    `json:"bridge,omitempty"`
	Gateway string    `json:"gateway,omitempty"`
	Nodes   []nodeDoc `json:"nodes"`
}

type nodeDoc struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Address   string `json:"address"`
	Namespace string `json:"namespace,omitempty"`
	PID       int    `json:"pid"`
	Running   bool   `json:"running"`
	// Stage is the node's last boot as its log tells it (localcluster's Stage).
	Stage string `json:"stage"`
}

// healthDoc is health's verdict: every node checked, healthy or not and why.
type healthDoc struct {
	Healthy bool            `json:"healthy"`
	Nodes   []nodeHealthDoc `json:"nodes"`
}

type nodeHealthDoc struct {
	Node    string `json:"node"`
	Healthy bool   `json:"healthy"`
	Problem string `json:"problem,omitempty"`
}

// writeDocument prints v as indented JSON or as YAML with the same keys.
func writeDocument(w io.Writer, format outputFormat, v any) error {
	if tmpl, ok := format.jsonpathTemplate(); ok {
		doc, err := genericDocument(v)
		if err != nil {
			return err
		}

		return writeJSONPath(w, tmpl, doc)
	}

	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}

	if format == formatYAML {
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()

		var doc any
		if err = dec.Decode(&doc); err != nil {
			return err
		}

		if out, err = yaml.Marshal(yamlSafe(doc)); err != nil {
			return err
		}
	} else {
		out = append(out, '\n')
	}

	_, err = w.Write(out)

	return err
}

func contextsDocument(c *certs.ClientConfig) []contextDoc {
	docs := []contextDoc{}

	for _, name := range contextNames(c) {
		ctx := c.Contexts[name]
		docs = append(docs, contextDoc{Name: name, Current: name == c.Context, Endpoints: orEmpty(ctx.Endpoints), Nodes: orEmpty(ctx.Nodes)})
	}

	return docs
}

func contextInfoDocument(name string, ctx *certs.ClientContext, now time.Time) (*contextInfoDoc, error) {
	doc := &contextInfoDoc{
		Context: name, Endpoints: orEmpty(ctx.Endpoints), Nodes: orEmpty(ctx.Nodes), Roles: []string{}, Certificates: []certDoc{},
		OtherFields: slices.Sorted(maps.Keys(ctx.Unknown)),
	}

	if len(ctx.Crt) > 0 {
		cert, err := ca.ParseCertificate(ctx.Crt)
		if err != nil {
			return nil, fmt.Errorf("context %s: client certificate: %w", name, err)
		}

		roles, unknown := role.FromOrganization(cert.Subject.Organization)
		doc.Roles, doc.Ignored = orEmpty(roles.Strings()), unknown
		doc.Certificates = append(doc.Certificates, newCertDoc("client", cert, now))
	}

	if len(ctx.CA) > 0 {
		cas, err := ca.ParseCertificates(ctx.CA)
		if err != nil {
			return nil, fmt.Errorf("context %s: CA: %w", name, err)
		}

		for _, c := range cas {
			doc.Certificates = append(doc.Certificates, newCertDoc("CA", c, now))
		}
	}

	return doc, nil
}

func newCertDoc(what string, cert *x509.Certificate, now time.Time) certDoc {
	return certDoc{
		What: what, Subject: subjectOf(cert), Key: ca.DescribeKey(cert.PublicKey), NotAfter: cert.NotAfter.UTC(),
		Expired: !now.Before(cert.NotAfter), Fingerprint: ca.Fingerprint(cert),
	}
}

func clusterDocument(c *localcluster.Cluster) clusterDoc {
	running := c.Running()
	doc := clusterDoc{Name: c.Name, Dir: c.Dir, Network: localcluster.NetworkLoopback, Nodes: []nodeDoc{}}

	if c.Net != nil {
		doc.Network, doc.Bridge, doc.Gateway = localcluster.NetworkNetns, c.Net.Bridge, c.Net.Gateway.String()
	}

	for _, n := range c.Nodes {
		doc.Nodes = append(doc.Nodes, nodeDoc{
			Name: n.Name, Type: string(n.Type), Address: n.Address, Namespace: c.Namespace(n), PID: n.PID, Running: running[n.Name],
			Stage: c.Stage(n),
		})
	}

	return doc
}

func healthDocument(r health.Round) healthDoc {
	doc := healthDoc{Healthy: r.Healthy(), Nodes: []nodeHealthDoc{}}

	for _, n := range slices.Sorted(maps.Keys(r)) {
		doc.Nodes = append(doc.Nodes, nodeHealthDoc{Node: n, Healthy: r[n] == "", Problem: r[n]})
	}

	return doc
}

// orEmpty makes a nil list an empty one, so JSON shows [] rather than null.
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}

	return list
}
