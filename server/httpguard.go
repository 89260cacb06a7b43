package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/hitl/links"
)

// httpGuard is the one check every request on the HTTP listener passes before any
// handler (the gateway, the console, /metrics, /healthz, pprof) sees it. It keeps web
// pages the owner happens to visit away from the control plane (docs/tenancy.md):
//
//   - Host: a page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) is
//     same-origin with the control plane as far as the browser knows, but its
//     requests carry the attacker's name in Host. Only loopback literals, localhost
//     and http.allowed_hosts are served (in multi-tenant mode, the list when set);
//     others get 421 Misdirected Request.
//   - Cross-origin writes: an unsafe method (anything but GET, HEAD, OPTIONS) whose
//     Origin is another origin, or that the browser marks Sec-Fetch-Site cross-site
//     or same-site, is 403, unless the origin is in http.cors_origins (never for the
//     console, which serves its own origin only).
//   - Body types: an API body must be application/json (the document of
//     /v1/specs/validate may also be YAML), a console body a form, and so is a body
//     for the approval channels under /hitl/ (a Slack interaction, a link's
//     confirmation; they are never CORS origins either). A browser sends
//     text/plain, a form or a typeless Blob cross-site without a CORS preflight
//     ("simple requests"); refusing them with 415 means a write needs a preflight,
//     which only a listed origin passes.
//
// Each refusal is logged and counted in agentplane_http_guard_refused_total{reason}.
type httpGuard struct {
	s *Server
	// hostsAny serves every Host (multi-tenant without allowed_hosts).
	hostsAny bool
	hosts    map[string]bool
	origins  map[string]bool
}

// Guard refusal reasons (the reason label of agentplane_http_guard_refused_total).
const (
	refusedHost        = "http.host_not_allowed"
	refusedCrossOrigin = "http.cross_origin"
	refusedContentType = "http.content_type"
)

func (s *Server) newHTTPGuard() *httpGuard {
	g := &httpGuard{s: s, hosts: map[string]bool{}, origins: map[string]bool{},
		hostsAny: s.cfg.Auth.RequirePrincipal && len(s.cfg.HTTP.AllowedHosts) == 0}
	for _, h := range s.cfg.HTTP.AllowedHosts {
		g.hosts[config.NormalizeHost(h)] = true
	}
	for _, o := range s.cfg.HTTP.CORSOrigins {
		g.origins[o] = true
	}
	return g
}

// wrap returns next behind the guard.
func (g *httpGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			g.refuse(w, r, http.StatusMisdirectedRequest, refusedHost,
				"this control plane does not serve the host name "+quoteHost(r.Host)+"; list it in http.allowed_hosts if it is yours")
			return
		}
		console := formArea(r.URL.Path)
		origin := r.Header.Get("Origin")
		cors := !console && g.origins[origin]
		if cors {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			if !cors {
				g.refuse(w, r, http.StatusForbidden, refusedCrossOrigin, "origin "+quoteHost(origin)+" is not in http.cors_origins")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Traceparent, Tracestate")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if unsafeMethod(r.Method) && !cors && crossOrigin(r, origin) {
			g.refuse(w, r, http.StatusForbidden, refusedCrossOrigin,
				"a change from another origin is refused (Origin "+quoteHost(origin)+", Sec-Fetch-Site "+quoteHost(r.Header.Get("Sec-Fetch-Site"))+")")
			return
		}
		if !bodyTypeAllowed(r, console) {
			want := "application/json"
			if console {
				want = "application/x-www-form-urlencoded"
			}
			g.refuse(w, r, http.StatusUnsupportedMediaType, refusedContentType,
				"a request body must be "+want+" (got Content-Type "+quoteHost(r.Header.Get("Content-Type"))+")")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *httpGuard) refuse(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	g.s.metrics.httpGuarded.WithLabelValues(reason).Inc()
	g.s.log.Warn("http request refused by the guard", "reason", reason, "method", r.Method, "path", loggedPath(r.URL.Path),
		"host", r.Host, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, code)
}

// hostAllowed: a loopback literal, localhost, or a listed name. *.localhost is not
// served by default: browsers that pin it to loopback make it safe, but a resolver
// that hands it to DNS makes it rebindable; list the names you use.
func (g *httpGuard) hostAllowed(hostport string) bool {
	if g.hostsAny {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = config.NormalizeHost(host)
	if host == "localhost" || g.hosts[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// formArea is a path whose bodies are forms and that serves its own origin only: the
// console, and the approval channels (Slack posts its interactions as a form; a
// link's confirmation page posts one).
func formArea(path string) bool {
	return path == "/ui" || strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/hitl/")
}

// loggedPath is a request path fit for the log: an approval link's token is a
// capability, so it is cut from its path.
func loggedPath(path string) string {
	if strings.HasPrefix(path, links.Path) {
		return links.Path + "…"
	}
	return path
}

func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// crossOrigin reports whether the browser says the request comes from a page of
// another origin: Origin names another one, or Sec-Fetch-Site is neither
// same-origin nor a person's own navigation. The Host has passed hostAllowed, so
// comparing Origin with it is sound. On a plaintext listener either scheme matches
// (a proxy in front may terminate TLS); on TLS only https does.
//
// Origin "null" is an opaque origin (a sandboxed frame, a data: URL), but also what
// Chrome sends on a form post from a page with Referrer-Policy: no-referrer, as the
// console's pages are: it passes only when Sec-Fetch-Site says same-origin.
func crossOrigin(r *http.Request, origin string) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
	default:
		return true
	}
	switch origin {
	case "":
		return false
	case "null":
		return site != "same-origin"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (r.TLS != nil && u.Scheme != "https") {
		return true
	}
	return withPort(u.Host, u.Scheme) != withPort(r.Host, u.Scheme)
}

// withPort lowers host[:port] and adds the scheme's default port when it has none.
func withPort(hostport, scheme string) string {
	hostport = strings.ToLower(hostport)
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), port)
}

// bodyTypeAllowed: a request that has a body, or a write that names a Content-Type,
// must name the area's type. A body without a type is refused too: a browser sends
// a Blob that way, cross-site and without a preflight.
func bodyTypeAllowed(r *http.Request, console bool) bool {
	ct := r.Header.Get("Content-Type")
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if !hasBody && (ct == "" || !unsafeMethod(r.Method)) {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	switch {
	case console:
		return mt == "application/x-www-form-urlencoded"
	case mt == "application/json":
		return true
	case strings.HasPrefix(r.URL.Path, "/a2a/"):
		// A2A's HTTP+JSON binding names its own media type (docs/a2a.md).
		return mt == "application/a2a+json"
	case r.URL.Path == "/v1/specs/validate":
		// The document itself is the body, and it may be YAML (docs/api.md).
		return mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml"
	}
	return false
}

// quoteHost quotes a header value for a refusal message, bounded.
func quoteHost(v string) string {
	if len(v) > 200 {
		v = v[:200] + "..."
	}
	return `"` + strings.ToValidUTF8(v, "?") + `"`
}
