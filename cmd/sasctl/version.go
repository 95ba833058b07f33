package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what sasctl was built from: its module's version and the
// commit of its source, as the Go toolchain stamped them.
type versionInfo struct {
	Version  string `json:"version"`          // the module's: v1.2.3, a pseudo-version from a checkout, or (devel)
	Commit   string `json:"commit,omitempty"` // the VCS revision of a build from a checkout
	Time     string `json:"time,omitempty"`   // that commit's time
	Modified bool   `json:"modified"`         // built with changes not committed
	Go       string `json:"go"`
}

// versionOf reads the version from the binary's build information (ok:
// there is some). Building from a checkout whose .git is a folder (go build,
// go install ./cmd/sasctl), the toolchain stamps the VCS settings and a
// pseudo-version; installing a tagged module (…/cmd/sasctl@v1.2.3), its
// version; with -buildvcs=false, or in a git worktree, neither: (devel).
func versionOf(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: "(unknown)"}
	if !ok {
		return v
	}
	v.Version, v.Go = bi.Main.Version, bi.GoVersion
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd() *cobra.Command {
	var o output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print sasctl's version and the commit it was built from",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, out := versionOf(debug.ReadBuildInfo()), cmd.OutOrStdout()
			return emit(out, o, v, func() {
				fmt.Fprintf(out, "sasctl %s", v.Version)
				if v.Commit != "" {
					fmt.Fprintf(out, ", commit %s", v.Commit)
					if v.Time != "" {
						fmt.Fprintf(out, " (%s)", v.Time)
					}
					if v.Modified {
						fmt.Fprint(out, ", with uncommitted changes")
					}
				}
				fmt.Fprintf(out, ", built with %s\n", v.Go)
			})
		},
	}
	outputFlag(cmd, &o)
	return cmd
}
