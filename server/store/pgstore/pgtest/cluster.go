package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Cluster is a PostgreSQL server of one test's own, in a temporary directory, that the
// test may crash, stop and start again: what a restart of the database does to the
// servers, without touching the PostgreSQL other tests share. It is PostgreSQL itself
// (initdb, pg_ctl, postgres), found under AGENTPLANE_TEST_PG_BINDIR, on PATH or in
// Debian's /usr/lib/postgresql/*/bin.
type Cluster struct {
	bin  string
	dir  string
	port int
	cred *syscall.Credential
}

// NewCluster initializes and starts a private cluster that trusts local connections
// on a free loopback port, and stops and removes it when t ends. Where PostgreSQL's
// programs are missing the test is skipped with a loud message, except under CI=true,
// where it fails. As root the cluster runs as the postgres user (PostgreSQL refuses
// root).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := bindir()
	if bin == "" {
		msg := "*** PostgreSQL's programs (initdb, pg_ctl) were not found; install postgresql " +
			"or set AGENTPLANE_TEST_PG_BINDIR ***"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	c := &Cluster{bin: bin}
	dir, err := os.MkdirTemp("", "agentplane-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c.dir = filepath.Join(dir, "data")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and there is no postgres user to run a private cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.exec("initdb", "-D", c.dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"+
		"max_connections = 60\nshared_buffers = 32MB\nfsync = on\nsynchronous_commit = on\n", c.port)
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c.Start(t)
	t.Cleanup(func() { _ = c.pgctl("stop", "-m", "immediate") })
	return c
}

// DSN is the URL of the cluster's postgres database.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Crash stops the server the way a power cut would (pg_ctl stop -m immediate): every
// connection is dropped, nothing is flushed, and the next start recovers from the WAL.
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	if err := c.pgctl("stop", "-m", "immediate"); err != nil {
		t.Fatal(err)
	}
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	if err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(filepath.Dir(c.dir), "postgres.log")); err != nil {
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(c.dir), "postgres.log"))
		t.Fatalf("%v\n%s", err, log)
	}
}

func (c *Cluster) pgctl(args ...string) error {
	return c.exec("pg_ctl", append([]string{"-D", c.dir}, args...)...)
}

func (c *Cluster) exec(prog string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = filepath.Dir(c.dir)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

func bindir() string {
	if d := os.Getenv("AGENTPLANE_TEST_PG_BINDIR"); d != "" {
		return d
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p)
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}
