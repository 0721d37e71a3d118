// Command protodeps writes a FileDescriptorSet of the Talos proto files that
// Aegis's own protos import, so protoc can compile against the descriptors
// compiled into the Talos machinery module (it ships no .proto sources).
package main

import (
	"fmt"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: protodeps OUT.pb")
		os.Exit(2)
	}

	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}

	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}

		seen[fd.Path()] = true

		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}

		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}

	add(common.File_common_common_proto)

	data, err := proto.Marshal(set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	if err := os.WriteFile(os.Args[1], data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
