package clusterhealth

import "time"

// Limits of the cluster health check.
const (
	// ProbeTimeout bounds the call to one node: a node on the cluster's
	// network answers a ServiceList in milliseconds; one that does not
	// within five seconds is reported as not answering.
	ProbeTimeout = 5 * time.Second
	// MaxParallelProbes bounds the nodes asked at once, so that a check of
	// a large cluster does not open a connection to every node at once.
	MaxParallelProbes = 16
	// PollInterval is the wait between two rounds while the cluster is not
	// healthy yet and the wait timeout has not passed.
	PollInterval = time.Second
	// MaxWaitTimeout caps the request's wait_timeout: a stream held open
	// longer is a client that forgot it.
	MaxWaitTimeout = time.Hour
	// MinCertLifeLeft is the part of a node certificate's life that must
	// remain: renewal happens at half-life, so a certificate past three
	// quarters has missed its renewal.
	MinCertLifeLeft = 0.25
)
