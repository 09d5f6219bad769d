package cmdline

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Shells are the shells Completion writes a script for.
var Shells = []string{"bash", "zsh", "fish"}

// Completion writes on w the completion script for shell (one of Shells)
// of the program's commands and flags: commands after the program's name,
// a command's flags after it, file names for the rest. Any other shell is
// an error saying which are offered.
func (p *Program) Completion(w io.Writer, shell string) error {
	var names []string
	cmdFlags := map[string][]string{}
	for _, c := range p.Commands {
		names = append(names, c.Name)
		for _, f := range c.FlagList() {
			cmdFlags[c.Name] = append(cmdFlags[c.Name], Dashed(f.Name))
		}
	}
	n := p.Name
	switch shell {
	case "bash":
		fmt.Fprintf(w, "# bash completion for %s (%s completion bash)\n_%s() {\n", n, n, n)
		fmt.Fprintf(w, "  local cur=${COMP_WORDS[COMP_CWORD]}\n")
		fmt.Fprintf(w, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(append(names, "help"), " "))
		fmt.Fprintf(w, "  local flags=\n  case ${COMP_WORDS[1]} in\n")
		for _, c := range names {
			fmt.Fprintf(w, "    %s) flags=%q ;;\n", c, strings.Join(cmdFlags[c], " "))
		}
		fmt.Fprintf(w, "    help) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n  esac\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  case $cur in\n    -*) COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\")) ;;\n    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n  esac\n}\ncomplete -o filenames -F _%s %s\n", n, n)
	case "zsh":
		fmt.Fprintf(w, "#compdef %s\n# zsh completion for %s (%s completion zsh)\n_%s() {\n", n, n, n, n)
		fmt.Fprintf(w, "  if (( CURRENT == 2 )); then compadd -- %s help; return; fi\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  local -a flags\n  case $words[2] in\n")
		for _, c := range names {
			fmt.Fprintf(w, "    %s) flags=(%s) ;;\n", c, strings.Join(cmdFlags[c], " "))
		}
		fmt.Fprintf(w, "    help) compadd -- %s; return ;;\n  esac\n", strings.Join(names, " "))
		fmt.Fprintf(w, "  if [[ $PREFIX == -* ]]; then compadd -- $flags; else _files; fi\n}\n")
		// Sourced, the script registers the function; autoloaded from
		// site-functions/_NAME by its #compdef line, the file's body runs
		// at the first completion, which it must then complete.
		fmt.Fprintf(w, "if [[ $funcstack[1] == _%s ]]; then _%s \"$@\"; else compdef _%s %s; fi\n", n, n, n, n)
	case "fish":
		fmt.Fprintf(w, "# fish completion for %s (%s completion fish)\n", n, n)
		for _, c := range p.Commands {
			fmt.Fprintf(w, "complete -c %s -n __fish_use_subcommand -a %s -d %s\n", n, c.Name, fishQuote(c.Summary))
			for _, f := range c.FlagList() {
				opt := "-l"
				if len(f.Name) == 1 {
					opt = "-s"
				}
				fmt.Fprintf(w, "complete -c %s -n '__fish_seen_subcommand_from %s' %s %s -d %s\n", n, c.Name, opt, f.Name, fishQuote(firstLine(f.Usage)))
			}
		}
	default:
		return fmt.Errorf("unknown shell %q: want bash, zsh or fish", shell)
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

// roff escapes text for a man page: backslashes, dashes, and a leading
// dot or quote that roff would take for a request.
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

// ManIndex writes the program's own manual page, NAME(1), dated date:
// its commands, exit statuses, and each command's page to see.
func (p *Program) ManIndex(w io.Writer, date string) {
	fmt.Fprintf(w, ".TH %s 1 %s %s\n.SH NAME\n%s \\- %s\n", strings.ToUpper(p.Name), date, p.Name, p.Name, p.Description)
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B %s\n%s\n.SH COMMANDS\n", p.Name, p.ManSynopsis)
	for _, c := range p.Commands {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roff(strings.TrimSpace(c.Name+" "+Synopsis(c.Args))), roff(c.Summary))
	}
	fmt.Fprintf(w, ".SH EXIT STATUS\n%s\n", p.ExitStatus)
	fmt.Fprintf(w, ".SH SEE ALSO\n")
	for i, c := range p.Commands {
		sep := ",\n"
		if i == len(p.Commands)-1 {
			sep = "\n"
		}
		fmt.Fprintf(w, ".BR %s\\-%s (1)%s", p.Name, roff(c.Name), sep)
	}
}

// ManPage writes the manual page of c, NAME-COMMAND(1), dated date, from
// the same text as its help: synopsis, description, and its flags by
// group, each with its variable when c reads the environment.
func (p *Program) ManPage(w io.Writer, c *Command, date string) {
	n := p.Name
	fmt.Fprintf(w, ".TH %s\\-%s 1 %s %s\n.SH NAME\n%s\\-%s \\- %s\n", strings.ToUpper(n), strings.ToUpper(roff(c.Name)), date, n, n, roff(c.Name), roff(c.Summary))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B %s %s\n%s\n", n, roff(c.Name), roff(c.Args))
	fmt.Fprintf(w, ".SH DESCRIPTION\n.nf\n%s\n.fi\n", roff(strings.TrimSpace(c.Help)))
	flags := c.FlagList()
	if len(flags) == 0 {
		fmt.Fprintf(w, ".SH SEE ALSO\n.BR %s (1)\n", n)
		return
	}
	fmt.Fprintf(w, ".SH OPTIONS\n")
	groups, titles := [][]*flag.Flag{flags}, []string{""}
	if c.Groups != nil {
		groups, titles = GroupFlags(flags, c.Groups), nil
		for _, g := range c.Groups {
			titles = append(titles, g.Title)
		}
	}
	for i, flags := range groups {
		if titles[i] != "" && len(flags) > 0 {
			fmt.Fprintf(w, ".SS %s\n", roff(titles[i]))
		}
		for _, f := range flags {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, ".TP\n.B %s %s\n%s\n", roff(Dashed(f.Name)), roff(name), roff(usage))
			if v, ok := p.FlagVar(f.Name); c.Env && ok {
				fmt.Fprintf(w, "Environment: %s.\n", roff(v))
			}
		}
	}
	fmt.Fprintf(w, ".SH SEE ALSO\n.BR %s (1)\n", n)
}
