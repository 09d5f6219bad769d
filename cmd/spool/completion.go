package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var completionCommand = &command{
	name:    "completion",
	args:    "bash|zsh|fish",
	summary: "print a shell completion script for spool's commands and flags",
	help: `
Prints a completion script for the shell named, generated from the
commands and flags of this spool. make install puts each where its shell
finds it (PREFIX/share/bash-completion/completions/spool,
PREFIX/share/zsh/site-functions/_spool,
PREFIX/share/fish/vendor_completions.d/spool.fish); or load it from the
shell's startup file:
  bash  source <(spool completion bash)        (~/.bashrc)
  zsh   source <(spool completion zsh)         (~/.zshrc, after compinit)
  fish  spool completion fish > ~/.config/fish/completions/spool.fish
Commands complete after spool, flags after a command, and the rest as
file names.`,
	opts: newOpts[completionOpts],
}

var manCommand = &command{
	name:    "man",
	args:    "DIR",
	summary: "write the manual pages, spool.1 and spool-COMMAND.1, into DIR",
	help: `
Writes the manual pages into DIR, which must exist: spool.1 with the list
of commands and exit statuses, and spool-COMMAND.1 for each command, from
the same text as spool help. make install (or make install-man) writes
them into $(PREFIX)/share/man/man1; nothing generated is kept in the
repository.`,
	opts: newOpts[manOpts],
}

// completionOpts are spool completion's: the shell named.
type completionOpts struct{ shell string }

func (*completionOpts) flags(*flag.FlagSet) {}

func (o *completionOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "SHELL"); err != nil {
		return err
	}
	o.shell = pos[0]
	return nil
}

func (o *completionOpts) run(_ context.Context, e *env) error {
	var names []string
	cmdFlags := map[string][]string{}
	for _, c := range commands {
		names = append(names, c.name)
		for _, f := range commandFlags(c) {
			cmdFlags[c.name] = append(cmdFlags[c.name], dashed(f.Name))
		}
	}
	w := e.stdout
	switch o.shell {
	case "bash":
		fmt.Fprintf(w, "# bash completion for spool (spool completion bash)\n_spool() {\n")
		fmt.Fprintf(w, "  local cur=${COMP_WORDS[COMP_CWORD]}\n")
		fmt.Fprintf(w, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(append(names, "help"), " "))
		fmt.Fprintf(w, "  local flags=\n  case ${COMP_WORDS[1]} in\n")
		for _, n := range names {
			fmt.Fprintf(w, "    %s) flags=%q ;;\n", n, strings.Join(cmdFlags[n], " "))
		}
		fmt.Fprintf(w, "    help) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n  esac\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  case $cur in\n    -*) COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\")) ;;\n    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n  esac\n}\ncomplete -o filenames -F _spool spool\n")
	case "zsh":
		fmt.Fprintf(w, "#compdef spool\n# zsh completion for spool (spool completion zsh)\n_spool() {\n")
		fmt.Fprintf(w, "  if (( CURRENT == 2 )); then compadd -- %s help; return; fi\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  local -a flags\n  case $words[2] in\n")
		for _, n := range names {
			fmt.Fprintf(w, "    %s) flags=(%s) ;;\n", n, strings.Join(cmdFlags[n], " "))
		}
		fmt.Fprintf(w, "    help) compadd -- %s; return ;;\n  esac\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  if [[ $PREFIX == -* ]]; then compadd -- $flags; else _files; fi\n}\n")
		// Sourced, the script registers the function; autoloaded from
		// site-functions/_spool by its #compdef line, the file's body runs
		// at the first completion, which it must then complete.
		fmt.Fprintf(w, "if [[ $funcstack[1] == _spool ]]; then _spool \"$@\"; else compdef _spool spool; fi\n")
	case "fish":
		fmt.Fprintf(w, "# fish completion for spool (spool completion fish)\n")
		for _, c := range commands {
			fmt.Fprintf(w, "complete -c spool -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
			for _, f := range commandFlags(c) {
				opt := "-l"
				if len(f.Name) == 1 {
					opt = "-s"
				}
				fmt.Fprintf(w, "complete -c spool -n '__fish_seen_subcommand_from %s' %s %s -d %s\n", c.name, opt, f.Name, fishQuote(firstLine(f.Usage)))
			}
		}
	default:
		return e.usage("unknown shell %q: want bash, zsh or fish", o.shell)
	}
	return nil
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// manOpts are spool man's: the directory the pages go to.
type manOpts struct{ dir string }

func (*manOpts) flags(*flag.FlagSet) {}

func (o *manOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		return e.usage("%s: not a directory", o.dir)
	}
	return nil
}

func (o *manOpts) run(_ context.Context, e *env) error {
	dir := o.dir
	date := time.Now().UTC().Format("2006-01-02")
	if err := writeManFile(filepath.Join(dir, "spool.1"), func(w io.Writer) { manIndex(w, date) }); err != nil {
		return err
	}
	for _, c := range commands {
		if err := writeManFile(filepath.Join(dir, "spool-"+c.name+".1"), func(w io.Writer) { manPage(w, c, date) }); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "wrote %d manual pages to %s\n", len(commands)+1, dir)
	return nil
}

// writeManFile writes one page, atomically.
func writeManFile(path string, fill func(io.Writer)) error {
	return (&env{}).output(path, func(w io.Writer) error { fill(w); return nil })
}

// roff escapes text for a man page: backslashes, and a leading dot or
// quote that roff would take for a request.
func roff(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.ReplaceAll(line, `\`, `\e`)
		line = strings.ReplaceAll(line, "-", `\-`)
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func manIndex(w io.Writer, date string) {
	fmt.Fprintf(w, ".TH SPOOL 1 %s spool\n.SH NAME\nspool \\- consume a directory message queue into an idempotent ledger\n", date)
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B spool\n.I COMMAND DIR\n[ARGS] [FLAGS]\n.SH COMMANDS\n")
	for _, c := range commands {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roff(strings.TrimSpace(c.name+" "+positionalSynopsis(c.args))), roff(c.summary))
	}
	fmt.Fprintf(w, ".SH EXIT STATUS\n0 ok, 1 a check found a problem, 2 bad usage or configuration, 3 runtime failure, 4 consume stopped at a signal with calls cut short.\n")
	fmt.Fprintf(w, ".SH SEE ALSO\n")
	for i, c := range commands {
		sep := ",\n"
		if i == len(commands)-1 {
			sep = "\n"
		}
		fmt.Fprintf(w, ".BR spool\\-%s (1)%s", roff(c.name), sep)
	}
}

func manPage(w io.Writer, c *command, date string) {
	fmt.Fprintf(w, ".TH SPOOL\\-%s 1 %s spool\n.SH NAME\nspool\\-%s \\- %s\n", strings.ToUpper(roff(c.name)), date, roff(c.name), roff(c.summary))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B spool %s\n%s\n", roff(c.name), roff(c.args))
	fmt.Fprintf(w, ".SH DESCRIPTION\n.nf\n%s\n.fi\n", roff(strings.TrimSpace(c.help)))
	flags := commandFlags(c)
	if len(flags) == 0 {
		fmt.Fprintf(w, ".SH SEE ALSO\n.BR spool (1)\n")
		return
	}
	fmt.Fprintf(w, ".SH OPTIONS\n")
	groups, titles := [][]*flag.Flag{flags}, []string{""}
	if c.groups != nil {
		groups, titles = groupFlags(flags, c.groups), nil
		for _, g := range c.groups {
			titles = append(titles, g.title)
		}
	}
	for i, flags := range groups {
		if titles[i] != "" && len(flags) > 0 {
			fmt.Fprintf(w, ".SS %s\n", roff(titles[i]))
		}
		for _, f := range flags {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, ".TP\n.B %s %s\n%s\n", roff(dashed(f.Name)), roff(name), roff(usage))
			if v, ok := flagVar(f.Name); c.env && ok {
				fmt.Fprintf(w, "Environment: %s.\n", roff(v))
			}
		}
	}
	fmt.Fprintf(w, ".SH SEE ALSO\n.BR spool (1)\n")
}
