package buildinfo

import "runtime/debug"

// Stamped by the Makefile with -ldflags "-X ...buildinfo.version=... -X ...buildinfo.commit=...".
var (
	version = ""
	commit  = ""
)

// Info describes a build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build information of this binary.
func Get() Info {
	info := Info{Version: version, Commit: commit, GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}
