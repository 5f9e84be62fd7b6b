// Package version reports the build's version, stamped at link time with
// -ldflags "-X github.com/agentsandbox/terraform-provider-agentsandbox/internal/version.Version=v1.2.3".
package version

import "runtime/debug"

// Version is the release version; "dev" in an unstamped build.
var Version = "dev"

// Commit returns the VCS revision the binary was built from, as the Go
// toolchain recorded it, or "unknown".
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	commit, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		commit += "-dirty"
	}
	return commit
}
