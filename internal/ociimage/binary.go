package ociimage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// elfArch is what an ELF file of a Go architecture says of itself.
type elfArch struct {
	machine elf.Machine
	class   elf.Class
	order   binary.ByteOrder
}

// elfArches are the Linux architectures Go builds for that an image may be
// made for, by GOARCH.
var elfArches = map[string]elfArch{
	"386":     {elf.EM_386, elf.ELFCLASS32, binary.LittleEndian},
	"amd64":   {elf.EM_X86_64, elf.ELFCLASS64, binary.LittleEndian},
	"arm":     {elf.EM_ARM, elf.ELFCLASS32, binary.LittleEndian},
	"arm64":   {elf.EM_AARCH64, elf.ELFCLASS64, binary.LittleEndian},
	"loong64": {elf.EM_LOONGARCH, elf.ELFCLASS64, binary.LittleEndian},
	"ppc64le": {elf.EM_PPC64, elf.ELFCLASS64, binary.LittleEndian},
	"riscv64": {elf.EM_RISCV, elf.ELFCLASS64, binary.LittleEndian},
	"s390x":   {elf.EM_S390, elf.ELFCLASS64, binary.BigEndian},
}

// checkBinary refuses a binary that cannot run in an image for goarch: the
// image holds no loader and no libraries, so the binary must be a static
// Linux executable of the image's architecture. name is the binary's path,
// for the error; data its content.
func checkBinary(name string, data []byte, goarch string) error {
	howTo := fmt.Sprintf("build it with GOOS=linux GOARCH=%s CGO_ENABLED=0", goarch)

	want, ok := elfArches[goarch]
	if !ok {
		return fmt.Errorf("ociimage: no image can be made for architecture %q", goarch)
	}

	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("ociimage: %s is not an ELF executable (%v); %s", name, err, howTo)
	}
	defer f.Close()

	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ociimage: %s is an ELF %s, not an executable; %s", name, f.Type, howTo)
	}

	if f.Machine != want.machine || f.Class != want.class || f.ByteOrder != want.order {
		return fmt.Errorf("ociimage: %s is built for %s (%s), the image is for %s: %s",
			name, f.Machine, f.Class, goarch, howTo)
	}

	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("ociimage: %s is dynamically linked (it asks for a program interpreter), "+
				"and the image holds no loader or libraries: %s", name, howTo)
		}
	}

	return nil
}
