package main

// sluice store verify|salvage: offline checks of an embedded data directory.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/sluicemq/sluice/broker/embedded"
)

func init() {
	register("store", command{"offline checks of a stopped broker's data directory: verify, salvage", func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
		return group(ctx, "store", storeCommands, args, env, stdout, stderr)
	}})
	groups["store"] = storeCommands // for the shell completion
	register("backup", command{"ask a running broker for an online copy of its store", backupCmd})
}

var storeCommands = map[string]command{
	"verify":  {"read every record of a data directory and list what is damaged", storeVerify},
	"salvage": {"copy every readable record of a data directory into a new one", storeSalvage},
}

// storeFlags adds --data to a store command (default SLUICE_DATA, as sluice
// serve has it).
func storeFlags(c *cli, env func(string) string) *string {
	def := "./sluice-data"
	if v := env("SLUICE_DATA"); v != "" {
		def = v
	}
	return c.fs.String("data", def, "the data directory (env SLUICE_DATA); its broker must be stopped")
}

// storeOpenErr reports an error opening a data directory, with what to do.
func storeOpenErr(c *cli, dir string, err error) int {
	fmt.Fprintf(c.stderr, "sluice %s: %v\n", c.name, err)
	if errors.Is(err, embedded.ErrDirLocked) {
		fmt.Fprintf(c.stderr, "  A broker is using %s: stop it first (the check reads the directory offline).\n", dir)
	}
	return 1
}

func damagedRows(ds []embedded.DamagedMessage) [][]string {
	rows := make([][]string, len(ds))
	for i, d := range ds {
		rows[i] = []string{cell(d.Queue), cell(d.MessageID), strconv.FormatUint(d.Key, 10), cell(d.File), cell(d.Problem)}
	}
	return rows
}

var damagedHeader = []string{"QUEUE", "MESSAGE ID", "KEY", "FILE", "PROBLEM"}

func storeVerify(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "store verify", args: "",
		summary:  "Reads every record of the embedded store in --data (the broker must be stopped) and\nlists the damaged messages, with the file that holds the damage, the parts of the store\nthat do not read at all (their messages are unknown), and any other damaged record.\nExits 0 when nothing is damaged, 1 when something is.",
		examples: []string{"sluice store verify --data /var/lib/sluice", "sluice store verify --json"}}, env, stdout, stderr)
	data := storeFlags(c, env)
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	rep, err := embedded.Verify(ctx, *data, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return storeOpenErr(c, *data, err)
	}
	if c.json {
		c.printJSON(rep)
	} else {
		format := "format " + strconv.FormatUint(rep.Format, 10)
		if rep.Format == 0 {
			format = "format unknown"
		}
		fmt.Fprintf(stdout, "%s: %s, %s, %s, %s, %s, %s\n", *data, format, plural(rep.Queues, "queue"),
			plural(rep.Messages, "readable message"), plural(len(rep.Damaged), "damaged message"),
			unknownText(rep.Unknown), plural(len(rep.Problems), "other problem"))
		if len(rep.Damaged) > 0 {
			table(stdout, damagedHeader, damagedRows(rep.Damaged))
		}
		printUnknown(stdout, rep.Unknown)
		for _, p := range rep.Problems {
			fmt.Fprintf(stdout, "problem: %s\n", p)
		}
		if !rep.OK() {
			fmt.Fprintf(stdout, "To keep every readable message: sluice store salvage --data %s --to NEW-DIR, then serve NEW-DIR.\n", *data)
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

func storeSalvage(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "store salvage", args: "",
		summary:  "Copies every readable record of the embedded store in --data (the broker must be\nstopped) into the new directory --to, and lists what could not be copied: messages lost\n(by id), parts of the store that do not read at all (their messages are unknown), other\nproblems. A store that does not open, or with a table that does not, is read file by file.\n--data is left as it was; start the broker on --to afterwards. Exits 0 when everything\nwas copied, 1 when anything was not.",
		examples: []string{"sluice store salvage --data /var/lib/sluice --to /var/lib/sluice-salvaged"}}, env, stdout, stderr)
	data := storeFlags(c, env)
	to := c.fs.String("to", "", "the new data directory (must not exist, or be empty)")
	if _, code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *to == "" {
		return c.usageErr("--to is required")
	}
	rep, err := embedded.Salvage(ctx, *data, *to, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		if rep == nil {
			return storeOpenErr(c, *data, err)
		}
		return c.fail(err)
	}
	if c.json {
		c.printJSON(rep)
	} else {
		fmt.Fprintf(stdout, "copied %s and %s into %s; %s lost, %s, %s\n", plural(rep.Queues, "queue"),
			plural(rep.Messages, "message"), *to, plural(len(rep.Lost), "message"), unknownText(rep.Unknown),
			plural(len(rep.Problems), "other problem"))
		if len(rep.Lost) > 0 {
			table(stdout, damagedHeader, damagedRows(rep.Lost))
		}
		printUnknown(stdout, rep.Unknown)
		for _, p := range rep.Problems {
			fmt.Fprintf(stdout, "problem: %s\n", p)
		}
		if !rep.Complete() {
			fmt.Fprintf(stdout, "Not everything was copied: the lines above say what is missing. %s holds the rest; keep %s until you are done with it.\n", *to, *data)
		}
	}
	if !rep.Complete() {
		return 1
	}
	return 0
}

// unknownText counts the unreadable parts of a store: "1 unreadable part
// (1.2 MiB: its messages are unknown)", "0 unreadable parts".
func unknownText(parts []embedded.UnreadablePart) string {
	if len(parts) == 0 {
		return "0 unreadable parts"
	}
	var n int64
	for _, p := range parts {
		n += p.Bytes
	}
	held := "they held"
	if len(parts) == 1 {
		held = "it held"
	}
	return fmt.Sprintf("%s (%s: how many messages %s is unknown)", plural(len(parts), "unreadable part"), sizeText(n), held)
}

// printUnknown lists the unreadable parts, one a line.
func printUnknown(w io.Writer, parts []embedded.UnreadablePart) {
	for _, p := range parts {
		fmt.Fprintf(w, "unreadable: %s, %s: %s\n", p.File, sizeText(p.Bytes), p.Problem)
	}
}

// sizeText is n bytes for a person: "512 bytes", "12.0 KiB", "1.2 MiB".
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return plural(n, "byte")
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

func backupCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	c := newCLI(ctx, cmdSpec{name: "backup", args: "NAME",
		summary:  "Asks the running broker at --url for an online, consistent copy of its embedded store\n(a checkpoint) in the new directory NAME under the broker's --backup-dir. The copy holds\nevery change acknowledged before the call; sluice serve --data opens it as it is.",
		examples: []string{"sluice backup nightly-2026-12-03", "sluice backup before-upgrade --json"}}, env, stdout, stderr)
	pos, code, ok := c.parse(args, 1, 1)
	if !ok {
		return code
	}
	b, err := c.c.Backup(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(b)
		return 0
	}
	fmt.Fprintf(stdout, "backup %s written to %s (on the broker's machine)\n", b.Name, b.Path)
	return 0
}
