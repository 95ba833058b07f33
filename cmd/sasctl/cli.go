package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sas-go/sas/shared/deployment"
)

// usageError is a bad command line: exit code 2, and a pointer to --help.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usageErrorf(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errReported means the command said on stderr why it failed: exit code 1,
// nothing more printed.
var errReported = errors.New("reported")

// noArgs refuses arguments: a command with subcommands names the unknown
// one.
func noArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case cmd.HasSubCommands():
		return usageErrorf("unknown command %q", args[0])
	}
	return usageErrorf("unexpected argument %q", args[0])
}

// exactly requires n arguments, what says which.
func exactly(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("need exactly %s, not %d argument%s", what, len(args), plural(len(args)))
		}
		return nil
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// output is the --output flag: text or json.
type output string

func (o *output) String() string { return string(*o) }
func (o *output) Type() string   { return "text|json" }

// Set implements pflag.Value.
func (o *output) Set(v string) error {
	if v != "text" && v != "json" {
		return errors.New("must be text or json")
	}
	*o = output(v)
	return nil
}

// outputFlag puts -o/--output on cmd, with its completion.
func outputFlag(cmd *cobra.Command, o *output) {
	*o = "text"
	cmd.Flags().VarP(o, "output", "o", "text, or json (its shape: shared/operator/output.schema.json)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// emit writes v as JSON (indented), or calls text.
func emit(out io.Writer, o output, v any, text func()) error {
	if o != "json" {
		text()
		return nil
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// settingFlags are flags made from deployment.Table's rows, bound to a
// Settings the command fills with its defaults first.
type settingFlags struct {
	deployment.Settings
	envErr error // a bad environment variable, reported when the command runs
}

// bind puts the named settings' flags on fs. A setting's environment
// variable, when set, is its flag's default.
func (f *settingFlags) bind(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		st, ok := deployment.Lookup(name)
		if !ok || st.Flag == "" {
			panic(fmt.Sprintf("sasctl: setting %q has no flag in deployment.Table", name))
		}
		v := st.Value(&f.Settings)
		usage := st.Usage
		if st.Env != "" {
			usage += " ($" + st.Env + ")"
			if env := os.Getenv(st.Env); env != "" {
				if err := v.Set(env); err != nil && f.envErr == nil {
					f.envErr = usageErrorf("$%s=%q: %w", st.Env, env, err)
				}
			}
		}
		fs.Var(v, st.Flag, usage)
		if v.Type() == "bool" {
			// As pflag's own BoolVar: --seal-data alone is true, and the
			// argument after it is not its value.
			fs.Lookup(st.Flag).NoOptDefVal = "true"
		}
	}
}

// check reports a bad environment variable read by bind.
func (f *settingFlags) check(*cobra.Command, []string) error { return f.envErr }

// localSettings are the settings a command that runs a local stack takes.
var localSettings = []string{"prefix", "workflows", "stepTimeout", "maxFailures", "retryBackoff", "pickupTimeout",
	"orderDeadline", "backlogDepth", "supervisorRate", "censusEvery", "batchWindowSeconds", "payloadInlineBytes", "sealData"}

// without is names less some.
func without(names []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(drop, n) })
}

// short cuts s to n characters, with an ellipsis.
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// oneLine is s on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
