package main

import (
	"context"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/rollout"
)

// rolloutOptions are the rollout engine's options for a procedure run in
// this session: its client, its errors worded as every command words them,
// its output and clock.
func (s *session) rolloutOptions(dryRun bool) rollout.Options {
	return rollout.Options{Client: s.client, Reply: s.reply, Out: s.e.stdout, Clock: s.e.clock, DryRun: dryRun}
}

// reply is a call's error as a person reads it: the call's own, else the
// nodes of resp that failed.
func (s *session) reply(resp proto.Message, err error) error {
	if err != nil {
		return s.explain(err)
	}

	return failedNodes(resp)
}

// switchCredentials replaces the CA bundle (and, crt not nil, the client
// certificate and key) of the context in use in the client config, and
// dials with them.
func (s *session) switchCredentials(ctx context.Context, caPEM, crt, key []byte) (*client.Client, error) {
	cfg, err := loadClientConfig(s.path)
	if err != nil {
		return nil, err
	}

	c := cfg.Contexts[s.name]
	if c == nil {
		return nil, fmt.Errorf("context %q left %s", s.name, s.path)
	}

	c.CA = caPEM
	if crt != nil {
		c.Crt, c.Key = crt, key
	}

	if err = cfg.Save(s.path); err != nil {
		return nil, err
	}

	s.ctx = c
	if err = s.loadCertificate(); err != nil {
		return nil, err
	}

	if err = s.dial(ctx); err != nil {
		return nil, err
	}

	return s.client, nil
}
