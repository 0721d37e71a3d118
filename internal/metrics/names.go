package metrics

// Names of the series Aegis exports besides the gRPC ones (grpc_server_*,
// go-grpc-middleware's names) and the Go runtime's (go_*, process_*). Every
// name is here, so a dashboard written for one daemon reads the others.
const (
	// CertificateNotAfter is the end of a certificate's validity, in unix
	// seconds, labelled by LabelCertificate and LabelSerial.
	CertificateNotAfter = "aegis_certificate_not_after_seconds"

	// ConnectionsOpen is the number of open connections of a listener.
	ConnectionsOpen = "aegis_connections_open"
	// ConnectionsLimit is a listener's connection cap, by LabelScope
	// (total, per_source).
	ConnectionsLimit = "aegis_connections_limit"
	// ConnectionsClosed counts connections closed by the limiter, by
	// LabelReason (refused, evicted, expired).
	ConnectionsClosed = "aegis_connections_closed_total"

	// StreamsOpen is the number of calls apid holds open, weighted by the
	// nodes they reach.
	StreamsOpen = "aegis_apid_streams_open"
	// StreamsLimit is one of apid's stream caps, by LabelScope (node,
	// identity, connection, peer_node).
	StreamsLimit = "aegis_apid_streams_limit"
	// StreamsRefused counts calls refused over a stream cap, by LabelScope.
	StreamsRefused = "aegis_apid_streams_refused_total"

	// TrustdIssued counts certificates trustd signed.
	TrustdIssued = "aegis_trustd_certificates_issued_total"
	// TrustdRefused counts Certificate calls trustd refused, by LabelReason.
	TrustdRefused = "aegis_trustd_certificates_refused_total"
	// TrustdTimeSynced is 1 while trustd's time gate is open, else 0.
	TrustdTimeSynced = "aegis_trustd_time_synced"
	// TrustdTokens is the number of records in trustd's token store.
	TrustdTokens = "aegis_trustd_tokens"
	// TrustdTokensLimit is the most records the token store holds.
	TrustdTokensLimit = "aegis_trustd_tokens_limit"

	// MachinedCallsOpen is the number of calls open on machined.sock, and
	// MachinedCallsLimit its bound.
	MachinedCallsOpen  = "aegis_machined_calls_open"
	MachinedCallsLimit = "aegis_machined_calls_limit"

	// ServiceState is 1 for the state a machined service is in and 0 for
	// the others, by LabelService and LabelState.
	ServiceState = "aegis_service_state"
	// ServiceUp is 1 while a service is running and healthy.
	ServiceUp = "aegis_service_up"
	// ServiceRestarts counts the times a service's run ended and its
	// restart policy started it again.
	ServiceRestarts = "aegis_service_restarts_total"
)

// Label names.
const (
	LabelCertificate = "certificate"
	LabelSerial      = "serial"
	LabelScope       = "scope"
	LabelReason      = "reason"
	LabelService     = "service"
	LabelState       = "state"
)
