package ociimage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
)

// elfBinary is a 64-bit little-endian ELF file of machine and type with
// the given program headers, then tail: enough for debug/elf, not to run.
func elfBinary(t *testing.T, machine elf.Machine, typ elf.Type, progs []elf.ProgType, tail string) []byte {
	t.Helper()

	const headerSize, progSize = 64, 56

	h := elf.Header64{
		Type: uint16(typ), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: headerSize, Ehsize: headerSize, Phentsize: progSize, Phnum: uint16(len(progs)),
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)

	var buf bytes.Buffer

	_ = binary.Write(&buf, binary.LittleEndian, h) //nolint:errcheck // a bytes.Buffer

	for _, p := range progs {
		_ = binary.Write(&buf, binary.LittleEndian, elf.Prog64{Type: uint32(p), Align: 1}) //nolint:errcheck // a bytes.Buffer
	}

	buf.WriteString(tail)

	return buf.Bytes()
}

// staticELF is a static executable of the machine's architecture holding
// tail; elfBinary writes 64-bit little-endian files only.
func staticELF(t *testing.T, tail string) []byte {
	t.Helper()

	a, ok := elfArches[runtime.GOARCH]
	if !ok || a.class != elf.ELFCLASS64 || a.order != binary.LittleEndian {
		t.Skipf("no test ELF file for %s", runtime.GOARCH)
	}

	return elfBinary(t, a.machine, elf.ET_EXEC, []elf.ProgType{elf.PT_LOAD}, tail)
}

func TestCheckBinary(t *testing.T) {
	load, interp := []elf.ProgType{elf.PT_LOAD}, []elf.ProgType{elf.PT_PHDR, elf.PT_INTERP, elf.PT_LOAD}

	for _, tt := range []struct {
		name, goarch string
		data         []byte
		want         []string // in the error, in order; none means accepted
	}{
		{name: "static amd64", goarch: "amd64", data: elfBinary(t, elf.EM_X86_64, elf.ET_EXEC, load, "")},
		{name: "static-pie arm64", goarch: "arm64", data: elfBinary(t, elf.EM_AARCH64, elf.ET_DYN, load, "")},
		{
			name: "dynamic", goarch: "amd64", data: elfBinary(t, elf.EM_X86_64, elf.ET_EXEC, interp, ""),
			want: []string{"bin/apid is dynamically linked", "CGO_ENABLED=0"},
		},
		{
			name: "wrong architecture", goarch: "amd64", data: elfBinary(t, elf.EM_AARCH64, elf.ET_EXEC, load, ""),
			want: []string{"bin/apid is built for EM_AARCH64", "the image is for amd64", "GOARCH=amd64"},
		},
		{
			name: "relocatable object", goarch: "amd64", data: elfBinary(t, elf.EM_X86_64, elf.ET_REL, nil, ""),
			want: []string{"bin/apid is an ELF ET_REL, not an executable", "CGO_ENABLED=0"},
		},
		{name: "script", goarch: "amd64", data: []byte("#!/bin/sh\nexit 0\n"), want: []string{"bin/apid is not an ELF executable", "GOOS=linux GOARCH=amd64 CGO_ENABLED=0"}},
		{name: "empty", goarch: "arm64", data: nil, want: []string{"bin/apid is not an ELF executable", "GOARCH=arm64"}},
		{name: "unknown architecture", goarch: "mips", data: elfBinary(t, elf.EM_MIPS, elf.ET_EXEC, load, ""), want: []string{`architecture "mips"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBinary("bin/apid", tt.data, tt.goarch)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}

				return
			}

			if err == nil {
				t.Fatal("accepted")
			}

			rest := err.Error()
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q: no %q", err, w)
				}

				rest = rest[i+len(w):]
			}
		})
	}
}

// TestWriteRefusesDynamicBinary packages a dynamically linked program of
// the machine (the system's own /bin/true).
func TestWriteRefusesDynamicBinary(t *testing.T) {
	const system = "/bin/true"

	f, err := elf.Open(system)
	if err != nil {
		t.Skipf("%s: %v", system, err)
	}

	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}

	f.Close()

	if !dynamic {
		t.Skipf("%s is static here", system)
	}

	_, err = Write(&bytes.Buffer{}, Spec{Name: ImageName("apid"), Binary: system, User: User{Name: "apid", UID: 1, GID: 1}})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Write of %s: %v", system, err)
	}
}
