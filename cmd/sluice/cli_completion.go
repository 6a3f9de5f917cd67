package main

// sluice completion bash|zsh|fish: shell completion scripts. The commands,
// subcommands and flags are read from the commands themselves (each one's
// --help), so a new command or flag completes without a change here; queue
// names complete from `sluice queue list --names` at the moment of the TAB.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

func init() {
	register("completion", command{"print a shell completion script (bash, zsh or fish)", completionCmd})
}

// queueArgCommands take a queue name as their first argument.
var queueArgCommands = map[string]bool{
	"queue show": true, "queue delete": true, "queue purge": true, "queue pause": true, "queue resume": true,
	"queue set": true, "queue consumers": true, "send": true, "recv": true, "peek": true,
	"dlq list": true, "dlq show": true, "dlq replay": true, "dlq delete": true, "dlq export": true,
}

// fileFlags take a file name.
var fileFlags = []string{"--file", "--lines", "--from-export", "--out", "--data"}

// groups are the commands with subcommands.
var groups = map[string]map[string]command{"queue": queueCommands, "dlq": dlqCommands, "schedule": scheduleCommands}

var flagLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// cmdFlags returns a command's flags ("--url", ...), read from its --help.
func cmdFlags(ctx context.Context, path ...string) []string {
	var help, stderr bytes.Buffer // --help prints on stdout
	run(ctx, append(path, "--help"), func(string) string { return "" }, &help, &stderr)
	var fs []string
	for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
		fs = append(fs, "--"+m[1])
	}
	sort.Strings(fs)
	return fs
}

// completionTree is every command path ("queue create", "send") with its
// flags, and the top-level names and each group's subcommands.
type completionTree struct {
	top   []string
	subs  map[string][]string // group -> subcommands
	flags map[string][]string // command path -> flags
	about map[string]string   // command path -> summary
}

func buildTree(ctx context.Context) completionTree {
	t := completionTree{subs: map[string][]string{}, flags: map[string][]string{}, about: map[string]string{}}
	t.top = sortedKeys(commands)
	for _, name := range t.top {
		t.about[name] = commands[name].summary
		subs, isGroup := groups[name]
		if !isGroup {
			if name != "completion" && name != "version" {
				t.flags[name] = cmdFlags(ctx, name)
			}
			continue
		}
		t.subs[name] = sortedKeys(subs)
		for _, s := range t.subs[name] {
			t.about[name+" "+s] = subs[s].summary
			t.flags[name+" "+s] = cmdFlags(ctx, name, s)
		}
	}
	return t
}

func completionCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "-h" || args[0] == "--help" {
		w := stderr // a wrong use
		if len(args) == 1 {
			w = stdout // asked for
		}
		fmt.Fprint(w, `usage: sluice completion bash|zsh|fish

Print a shell completion script: commands, subcommands, flags, and queue names (read from
the broker at SLUICE_URL when you press TAB).

examples:
  source <(sluice completion bash)                        # this shell; add it to ~/.bashrc to keep it
  sluice completion zsh > "${fpath[1]}/_sluice"            # zsh (or: source <(sluice completion zsh))
  sluice completion fish > ~/.config/fish/completions/sluice.fish
`)
		if len(args) == 1 {
			return 0
		}
		return 2
	}
	t := buildTree(ctx)
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashScript(t))
	case "zsh":
		// zsh runs the bash function through its bashcompinit layer.
		fmt.Fprint(stdout, "#compdef sluice\n# zsh completion for sluice: sluice completion zsh > \"${fpath[1]}/_sluice\"\nautoload -U +X bashcompinit && bashcompinit\n")
		fmt.Fprint(stdout, bashScript(t))
	case "fish":
		fmt.Fprint(stdout, fishScript(t))
	default:
		fmt.Fprintf(stderr, "sluice completion: unknown shell %q: use bash, zsh or fish\n", args[0])
		return 2
	}
	return 0
}

func bashScript(t completionTree) string {
	var b strings.Builder
	b.WriteString(`# bash completion for sluice: source <(sluice completion bash)
_sluice() {
    local cur prev key
    # Slices, not subscripts: they count from 0 in zsh too (bashcompinit).
    cur="${COMP_WORDS[@]:$COMP_CWORD:1}"
    prev="${COMP_WORDS[@]:$((COMP_CWORD-1)):1}"
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "` + strings.Join(t.top, " ") + `" -- "$cur"))
        return
    fi
    key="${COMP_WORDS[@]:1:1}"
    case "$key" in
`)
	for _, g := range sortedKeys(t.subs) {
		fmt.Fprintf(&b, `    %s)
        if [[ $COMP_CWORD -eq 2 ]]; then
            COMPREPLY=($(compgen -W "%s" -- "$cur"))
            return
        fi
        key="$key ${COMP_WORDS[@]:2:1}" ;;
`, g, strings.Join(t.subs[g], " "))
	}
	b.WriteString(`    completion)
        COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
        return ;;
    esac
    case "$prev" in
        ` + strings.Join(fileFlags, "|") + `)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --dlq)
            COMPREPLY=($(compgen -W "$(sluice queue list --names 2>/dev/null)" -- "$cur"))
            return ;;
    esac
    if [[ $cur == -* ]]; then
        case "$key" in
`)
	for _, k := range sortedKeys(t.flags) {
		fmt.Fprintf(&b, "            %q) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", k, strings.Join(t.flags[k], " "))
	}
	b.WriteString(`        esac
        return
    fi
    case "$key" in
        `)
	var qs []string
	for _, k := range sortedKeys(queueArgCommands) {
		qs = append(qs, fmt.Sprintf("%q", k))
	}
	b.WriteString(strings.Join(qs, "|"))
	b.WriteString(`)
            COMPREPLY=($(compgen -W "$(sluice queue list --names 2>/dev/null)" -- "$cur")) ;;
    esac
}
complete -o default -F _sluice sluice
`)
	return b.String()
}

// fishQuote quotes s for fish: single quotes, with \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func fishScript(t completionTree) string {
	var b strings.Builder
	b.WriteString("# fish completion for sluice: sluice completion fish > ~/.config/fish/completions/sluice.fish\n")
	b.WriteString("complete -c sluice -f\n")
	for _, name := range t.top {
		fmt.Fprintf(&b, "complete -c sluice -n __fish_use_subcommand -a %s -d %s\n", name, fishQuote(t.about[name]))
	}
	b.WriteString("complete -c sluice -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
	for _, g := range sortedKeys(t.subs) {
		subs := strings.Join(t.subs[g], " ")
		for _, s := range t.subs[g] {
			fmt.Fprintf(&b, "complete -c sluice -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a %s -d %s\n",
				g, subs, s, fishQuote(t.about[g+" "+s]))
		}
	}
	cond := func(path string) string {
		parts := strings.Fields(path)
		c := "__fish_seen_subcommand_from " + parts[0]
		if len(parts) == 2 {
			c += "; and __fish_seen_subcommand_from " + parts[1]
		}
		return c
	}
	for _, k := range sortedKeys(t.flags) {
		for _, f := range t.flags[k] {
			name := strings.TrimPrefix(f, "--")
			extra := ""
			for _, ff := range fileFlags {
				if ff == f {
					extra = " -r -F"
				}
			}
			if f == "--dlq" {
				extra = " -r -a '(sluice queue list --names 2>/dev/null)'"
			}
			fmt.Fprintf(&b, "complete -c sluice -n %s -l %s%s\n", fishQuote(cond(k)), name, extra)
		}
	}
	for _, k := range sortedKeys(queueArgCommands) {
		fmt.Fprintf(&b, "complete -c sluice -n %s -a '(sluice queue list --names 2>/dev/null)'\n", fishQuote(cond(k)))
	}
	return b.String()
}
