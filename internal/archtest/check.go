package archtest

import (
	"fmt"
	"os"
)

// Report holds what each check found.
type Report struct {
	Imports, Status, LogKeys, Defaults []Violation
}

// Check holds the module at root to the rules of the document at doc.
func Check(root, doc string) (*Report, error) {
	text, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}

	rules, err := ParseDoc(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doc, err)
	}

	pkgs, err := ListPackages(root)
	if err != nil {
		return nil, err
	}

	src, err := parseModule(root)
	if err != nil {
		return nil, err
	}

	return &Report{
		Imports:  rules.CheckImports(pkgs),
		Status:   src.checkStatus(rules.StatusFuncs),
		LogKeys:  src.checkLogKeys(),
		Defaults: src.checkDefaults(),
	}, nil
}
