package etcdutil

// MaxKeepAliveStreams is maxKeepAliveStreams, for the tests of Leader.
const MaxKeepAliveStreams = maxKeepAliveStreams
