// Command sluice is the Sluice broker and its command-line tools.
//
//	sluice serve [flags]   run the broker (SQS API on --addr, data in --data)
//	sluice version         print the version (also sluice --version)
//
// The binary only parses flags and wires packages together: the broker lives
// in broker/embedded, the HTTP side in server and api/sqs.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one sluice subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int
}

// commands are the subcommands. Each one beyond serve and version registers
// itself from its own file's init (register), so adding a command touches no
// other file.
var commands = map[string]command{
	"serve":   {"run the broker", serve},
	"version": {"print the version", printVersion},
}

// register adds a subcommand; called from init functions.
func register(name string, c command) {
	if _, dup := commands[name]; dup {
		panic("sluice: command " + name + " registered twice")
	}
	commands[name] = c
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the exit code. ctx is cancelled
// by SIGTERM or SIGINT.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout) // asked for: on stdout, so that | less shows it
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		return printVersion(ctx, args[1:], env, stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(stderr, "sluice: unknown command %q%s\n\n", args[0], didYouMean(args[0], names, "sluice "))
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], env, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice <command> -h' for the flags of a command; 'sluice --version' prints the version.")
}
