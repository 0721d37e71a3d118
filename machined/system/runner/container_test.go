package runner

import (
	"context"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestContainerLimits applies the limits of a config to a spec: each one
// set lands in the spec's resources, and none is set when zero.
func TestContainerLimits(t *testing.T) {
	apply := func(cfg ContainerConfig) *oci.Spec {
		s := &oci.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}

		if err := oci.ApplyOpts(context.Background(), nil, &containers.Container{}, s, (&container{cfg: cfg}).limits()...); err != nil {
			t.Fatal(err)
		}

		return s
	}

	s := apply(ContainerConfig{MemoryLimit: 64 << 20, PidsLimit: 100, OpenFiles: 4096, CgroupsPath: "/aegis/apid", CPUShares: 9537})
	r := s.Linux.Resources

	if r == nil || r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != 64<<20 {
		t.Errorf("memory: %+v", r)
	}

	if r == nil || r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != 100 {
		t.Errorf("pids: %+v", r)
	}

	if r == nil || r.CPU == nil || r.CPU.Shares == nil || *r.CPU.Shares != 9537 {
		t.Errorf("cpu: %+v", r)
	}

	if s.Linux.CgroupsPath != "/aegis/apid" {
		t.Errorf("cgroups path %q", s.Linux.CgroupsPath)
	}

	if len(s.Process.Rlimits) != 1 || s.Process.Rlimits[0].Hard != 4096 || s.Process.Rlimits[0].Soft != 4096 {
		t.Errorf("rlimits: %+v", s.Process.Rlimits)
	}

	if s = apply(ContainerConfig{}); s.Linux.Resources != nil || len(s.Process.Rlimits) != 0 {
		t.Errorf("a config without limits set %+v, %+v", s.Linux.Resources, s.Process.Rlimits)
	}
}
