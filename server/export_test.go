package server

import "time"

// ReapMCPSessions closes the MCP sessions idle since idleSince, as the reaper does
// every so often (tests do not wait for it).
func ReapMCPSessions(s *Server, idleSince time.Time) { s.mcp.reapOnce(idleSince) }
