// Package api holds Aegis's own protobuf services, for what the Talos API
// lacks (token management, client-certificate renewal), with the generated
// Go code committed beside the .proto files.
package api
