package apid

import (
	"errors"
	"strings"
	"sync"

	// The Talos API's services, so their streaming methods are known.
	_ "github.com/cosi-project/runtime/api/v1alpha1"
	_ "github.com/siderolabs/talos/pkg/machinery/api/cluster"
	_ "github.com/siderolabs/talos/pkg/machinery/api/inspect"
	_ "github.com/siderolabs/talos/pkg/machinery/api/machine"
	_ "github.com/siderolabs/talos/pkg/machinery/api/storage"
	_ "github.com/siderolabs/talos/pkg/machinery/api/time"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Aegis's own services.
	_ "github.com/aegis-os/aegis/api/certificates"
	_ "github.com/aegis-os/aegis/api/machineconfig"
	_ "github.com/aegis-os/aegis/api/membership"
	_ "github.com/aegis-os/aegis/api/rotation"
	_ "github.com/aegis-os/aegis/api/tokens"
)

// errNoFanOut refuses `nodes` for a service whose replies do not follow the
// Talos convention that merging relies on.
var errNoFanOut = errors.New("apid: this service cannot be called on several nodes at once")

// fansOut reports whether method belongs to a service whose replies carry
// common.Metadata in field 1 (see tag.go), so `nodes` may merge them. These
// are the Talos API's node services and Aegis's own; others (COSI
// resources, for one) are refused with `nodes`, as Talos refuses them.
func fansOut(method string) bool {
	for _, prefix := range []string{
		"/machine.", "/cluster.", "/inspect.", "/storage.", "/time.", "/aegis.",
	} {
		if strings.HasPrefix(method, prefix) {
			return true
		}
	}

	return false
}

// streamsReplies reports whether method sends a stream of replies, from the
// descriptors registered in protoregistry. A method apid does not know is
// taken as unary, and its replies are merged into one: the node then most
// likely answers Unimplemented, which merges into an error entry any reply
// type decodes.
func streamsReplies(method string) bool {
	m := methodDescriptor(method)

	return m != nil && m.IsStreamingServer()
}

// takesOneRequest reports whether method is known to take exactly one
// request message (unary and server-streaming methods). A method apid does
// not know may take a stream, so it is not.
func takesOneRequest(method string) bool {
	m := methodDescriptor(method)

	return m != nil && !m.IsStreamingClient()
}

// isUnary reports whether method is known to take one request and send
// one reply: a call that ends by itself.
func isUnary(method string) bool {
	m := methodDescriptor(method)

	return m != nil && !m.IsStreamingClient() && !m.IsStreamingServer()
}

// methodDescriptor finds a "/package.Service/Method" name in protoregistry,
// or returns nil. It asks methodTable: a lookup in the registry itself
// parses the name and takes the registry's lock, two or three times a call.
func methodDescriptor(method string) protoreflect.MethodDescriptor {
	if !strings.HasPrefix(method, "/") {
		method = "/" + method
	}

	return methodTable()[method]
}

// methodTable maps "/package.Service/Method" to its descriptor for every
// method of every service protoregistry holds. It is built at its first
// use, once every package's descriptors have been registered (at init),
// and never changed after; a name a caller sends adds nothing to it.
var methodTable = sync.OnceValue(func() map[string]protoreflect.MethodDescriptor {
	table := map[string]protoreflect.MethodDescriptor{}

	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				m := sd.Methods().Get(j)
				table["/"+string(sd.FullName())+"/"+string(m.Name())] = m
			}
		}

		return true
	})

	return table
})
