package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// strictGroups makes every command that only groups others (token, etcd,
// cluster, …) refuse an argument that names none of them, with
// suggestions, as the root command does: cobra otherwise prints the
// group's help and exits 0, so `aegisctl token revok ID` looked like it
// had worked. Without arguments a group still prints its help.
func strictGroups(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		strictGroups(sub)
	}

	if cmd.Runnable() || !cmd.HasSubCommands() || !cmd.HasParent() {
		return
	}

	cmd.SuggestionsMinimumDistance = 2 // the root's default, which groups lack
	cmd.Args = unknownSubcommand
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// unknownSubcommand refuses any argument of a group command.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}

	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())

	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t") + "\n"
	}

	return fmt.Errorf("%s\nRun '%s --help' for its commands", msg, cmd.CommandPath())
}
