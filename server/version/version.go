// Package version is the build version of agentplane's binaries, in a package of its
// own so that ctl can print it without linking the server.
package version

import "runtime/debug"

// Version is the build version. Release builds set it with
// -ldflags "-X github.com/agentplane/agentplane/server/version.Version=v1.2.3".
var Version = ""

// String returns Version, or the module version from the build info, or "dev".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
