package metrics

import "time"

// Limits of the metrics endpoint. It is plain HTTP on the node address,
// reachable by anyone who can reach the node: it must stay cheap whatever
// a client does.
const (
	// MaxScrapesInFlight bounds concurrent scrapes; a Prometheus server
	// scrapes one at a time, a few more leave room for an operator's curl.
	// Beyond it a scrape answers 503 at once.
	MaxScrapesInFlight = 4
	// ScrapeTimeout bounds the gathering of one scrape; every collector
	// reads memory but a control plane's etcd one, which asks its local
	// member for its status within 2 s, so this is far above what a
	// scrape takes.
	ScrapeTimeout = 10 * time.Second
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request, so that idle connections cannot pile up.
	ReadHeaderTimeout = 5 * time.Second
	// IdleTimeout closes kept-alive connections between scrapes that
	// come less often than this (Prometheus defaults to every 15–60 s).
	IdleTimeout = 90 * time.Second
	// MaxHeaderBytes bounds a request's headers; a scrape sends a few
	// hundred bytes.
	MaxHeaderBytes = 8 << 10
	// MaxConnections and MaxConnectionsPerSource bound the endpoint's
	// connections (internal/connlimit): one Prometheus server, or two in
	// a pair, keeps one connection each; the rest is room for an operator.
	MaxConnections          = 16
	MaxConnectionsPerSource = 4
	// FirstRequestTimeout closes a connection that sends no request.
	FirstRequestTimeout = ReadHeaderTimeout
)
