package server

import (
	"net/http"
	"sort"

	"github.com/agentplane/agentplane/server/a2a"
	"github.com/agentplane/agentplane/server/version"
)

// newA2A builds the A2A face (docs/a2a.md): one A2A agent per static agent. It calls
// the API over the gateway's in-process connection, as the console does, so every A2A
// call runs the API's authentication, method table, tenant checks and limits.
func (s *Server) newA2A() (http.Handler, error) {
	ids := make([]string, 0, len(s.domain.static))
	for id := range s.domain.static {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	agents := make([]a2a.Agent, 0, len(ids))
	for _, id := range ids {
		spec := s.domain.static[id]
		c := s.cfg.A2A.Agents[id]
		name := c.Name
		if name == "" {
			name = spec.GetName()
		}
		agents = append(agents, a2a.Agent{ID: id, Name: name, Description: c.Description, Queue: c.Queue, ClientTools: spec.GetTools()})
	}
	return a2a.New(a2a.Options{
		Conn: s.gwConn, Annotate: s.tls2peer.annotate,
		Agents: agents, DefaultAgent: s.cfg.A2ADefaultAgent(), PublicURL: s.cfg.A2A.PublicURL,
		MultiTenant: s.cfg.Auth.RequirePrincipal, Bearer: len(s.cfg.Auth.Tokens) > 0, MTLS: len(s.cfg.Auth.ClientCerts) > 0 && s.tls != nil,
		MaxBodyBytes: s.maxHTTPBody(), MaxStreams: s.cfg.A2A.MaxStreams, BlockingTimeout: s.cfg.A2A.BlockingTimeout.D(),
		Version: version.String(), Log: s.log.With("face", "a2a"), Registerer: s.metrics.registry, Stopping: s.Stopping(),
	})
}
