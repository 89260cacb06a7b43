package config

import (
	"net"
	"net/url"
	"strings"
)

// HTTP configures the guard every request on the HTTP listener passes (the
// HTTP/JSON API, the console, /metrics, /healthz): which Host names it serves and
// which other origins may call the API from a browser (docs/configuration.md,
// docs/tenancy.md).
type HTTP struct {
	// AllowedHosts are the host names (or IP literals), without a port, that the
	// HTTP listener answers besides loopback literals and localhost. In single-user
	// mode any other Host is refused, which defeats DNS rebinding; in multi-tenant
	// mode the list applies when set.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// CORSOrigins are the browser origins (scheme://host[:port], as a browser sends
	// them) allowed to call the API cross-origin, with preflight. Off when empty.
	// Never the console: it serves its own origin only.
	CORSOrigins []string `yaml:"cors_origins"`
}

// NormalizeHost lowers a host name and drops a trailing dot and IPv6 brackets, the
// form AllowedHosts and a request's Host are compared in.
func NormalizeHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func (c *Config) validateHTTP(bad func(string, ...any)) {
	for _, h := range c.HTTP.AllowedHosts {
		if !validHostName(h) {
			bad("http.allowed_hosts %q: want a host name or IP address without a port or scheme (wildcards are not supported)", h)
		}
	}
	for _, o := range c.HTTP.CORSOrigins {
		if msg := checkOrigin(o); msg != "" {
			bad("http.cors_origins %q: %s", o, msg)
		}
	}
}

// validHostName accepts an IP literal or a DNS name of letters, digits, hyphens
// and dots (labels of 1 to 63 characters, 253 in all).
func validHostName(h string) bool {
	n := NormalizeHost(h)
	if net.ParseIP(n) != nil {
		return true
	}
	if n == "" || len(n) > 253 || n != strings.ToLower(h) {
		return false
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// checkOrigin says what is wrong with a CORS origin, or "" when it is exactly
// what a browser sends in Origin: a lowercase http or https scheme and host, the
// port only when it is not the scheme's default, nothing else.
func checkOrigin(o string) string {
	if o == "*" || o == "null" {
		return "list each origin; * and null would let any page act as the caller"
	}
	u, err := url.Parse(o)
	if err != nil {
		return err.Error()
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "want an http:// or https:// origin"
	case u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "want scheme://host[:port] with no path, user, query or fragment"
	case o != strings.ToLower(o):
		return "write it in lowercase, as browsers send it"
	case u.Port() == "80" && u.Scheme == "http", u.Port() == "443" && u.Scheme == "https":
		return "leave out the default port, as browsers do"
	case !validHostName(u.Hostname()):
		return "the host is not a host name or IP address"
	}
	return ""
}
