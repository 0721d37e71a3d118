package metrics

// Names of the series Aegis exports besides the gRPC ones (grpc_server_*,
// go-grpc-middleware's names) and the Go runtime's (go_*, process_*). Every
// name is here, so a dashboard written for one daemon reads the others.
const (
	// BuildInfo is 1, labelled by LabelVersion, LabelTalosAPI and
	// LabelGoVersion: the build a daemon runs.
	BuildInfo = "aegis_build_info"

	// CertificateNotAfter is the end of a certificate's validity, in unix
	// seconds, labelled by LabelCertificate and LabelSerial.
	CertificateNotAfter = "aegis_certificate_not_after_seconds"
	// CertificateExpiry is the time left until a certificate's NotAfter,
	// in seconds (negative once expired), labelled as CertificateNotAfter.
	CertificateExpiry = "aegis_certificate_expiry_seconds"

	// HandshakesRefused counts TLS handshakes a listener refused, by
	// LabelListener and LabelReason (revoked, certificate, no_certificate,
	// handshake).
	HandshakesRefused = "aegis_handshakes_refused_total"

	// ClientCertificates counts the client certificates a node was asked
	// for, by LabelOperation (generate, renew) and LabelOutcome (issued,
	// refused, failed).
	ClientCertificates = "aegis_client_certificates_total"

	// EtcdUp is 1 while the node's etcd member answers its Status call
	// without errors, by LabelMember; EtcdHasLeader is 1 while it knows
	// a leader; EtcdIsLeader is 1 while it is the leader.
	EtcdUp        = "aegis_etcd_up"
	EtcdHasLeader = "aegis_etcd_has_leader"
	EtcdIsLeader  = "aegis_etcd_is_leader"
	// EtcdLeaderChanges counts the changes of leader the member reported
	// between two of its Status calls (each scrape makes one).
	EtcdLeaderChanges = "aegis_etcd_leader_changes_total"
	// EtcdRaftTerm is the member's raft term: it grows by one at each
	// election, so its increase counts elections the scrapes missed.
	EtcdRaftTerm = "aegis_etcd_raft_term"
	// EtcdDBSize and EtcdDBSizeInUse are the member's database file size
	// and the part of it in use, in bytes.
	EtcdDBSize      = "aegis_etcd_db_size_bytes"
	EtcdDBSizeInUse = "aegis_etcd_db_size_in_use_bytes"

	// TimeSynced is 1 while the node's clock is within bounds of its NTP
	// servers (or trusted as is), else 0.
	TimeSynced = "aegis_time_synced"
	// TimeOffset is the local clock's offset from the NTP server of the
	// last valid reply, in seconds.
	TimeOffset = "aegis_time_offset_seconds"
	// TimeLastCheck is when the last round of NTP queries ended, unix
	// seconds (0 before the first).
	TimeLastCheck = "aegis_time_last_check_seconds"

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

	// TrustdIssued counts certificates trustd signed (the sum of
	// TrustdDecisions with LabelOutcome "issued", kept for dashboards
	// written before it).
	TrustdIssued = "aegis_trustd_certificates_issued_total"
	// TrustdRefused counts Certificate calls trustd refused, by LabelReason.
	TrustdRefused = "aegis_trustd_certificates_refused_total"
	// TrustdDecisions counts Certificate calls by LabelTokenKind (static,
	// static-previous, stored, none: refused before the token was known)
	// and LabelOutcome ("issued", or the refusal's reason).
	TrustdDecisions = "aegis_trustd_decisions_total"
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
	LabelVersion     = "version"
	LabelTalosAPI    = "talos_api_version"
	LabelGoVersion   = "go_version"
	LabelListener    = "listener"
	LabelOperation   = "operation"
	LabelOutcome     = "outcome"
	LabelMember      = "member"
	LabelTokenKind   = "token_kind"
)

// Values of LabelOutcome and LabelOperation shared by the daemons.
const (
	OutcomeIssued  = "issued"
	OutcomeRefused = "refused"
	OutcomeFailed  = "failed"

	OperationGenerate = "generate"
	OperationRenew    = "renew"
)
