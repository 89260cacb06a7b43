// Package console is the web console served by the control plane under /ui/: the
// inbox of pending approvals, interrupts with approve / reject / edit, tasks with
// their live timelines, and capabilities (docs/console.md).
//
// The pages are html/template renderings of embedded files with a little script
// (no build step, nothing loaded from elsewhere). Every read and every change goes
// through the public API, in process, as the signed-in principal: the console calls
// the same gRPC services, interceptors and method table as any client, so
// authentication, roles, tenant isolation and limits are the API's, not a copy.
//
// A sign-in exchanges a bearer token for a session cookie sealed with AES-256-GCM
// (HttpOnly, SameSite=Strict, Secure under TLS, with an expiry); every POST carries
// the session's CSRF token. In single-user mode there is nothing to sign in to, but
// the session (and its CSRF token) exists all the same. Requests reach the console
// only through the server's HTTP guard (server/httpguard.go), which refuses a Host the
// deployment does not serve, a POST from another origin and a body that is not a
// form; the console relies on it and does not repeat those checks.
package console
