package server

import "runtime/debug"

// Version is the build version. Release builds set it with
// -ldflags "-X github.com/agentplane/agentplane/server.Version=v1.2.3".
var Version = ""

// BuildVersion returns Version, or the module version from the build info, or "dev".
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
