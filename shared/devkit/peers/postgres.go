package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// postgres is a PostgreSQL server this program started: its own data
// folder, 127.0.0.1 only, a free port, fsync on (the default).
type postgres struct {
	cmd  *exec.Cmd
	port int
	done chan struct{}
}

// errNoPostgres says why DBOS cannot run here.
var errNoPostgres = errors.New("no PostgreSQL server binaries (postgres and initdb) on PATH or under /usr/lib/postgresql")

// postgresBin finds a PostgreSQL program: on PATH, or in Debian's folder.
func postgresBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		return "", errNoPostgres
	}
	return found[len(found)-1], nil
}

// startPostgres initialises a cluster under dir and starts its server. As
// root (which PostgreSQL refuses), it runs as the user postgres, or nobody.
func startPostgres(ctx context.Context, dir string) (*postgres, error) {
	initdb, err := postgresBin("initdb")
	if err != nil {
		return nil, err
	}
	server, err := postgresBin("postgres")
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	init := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	init.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := init.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	port, err := emulator.FreePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, fmt.Errorf("postgres log: %w", err)
	}
	defer log.Close()
	p := &postgres{port: port, done: make(chan struct{})}
	p.cmd = exec.Command(server, "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir, "-c", "fsync=on")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.ready(30 * time.Second); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("postgres (log %s): %w", log.Name(), err)
	}
	harness.Logf("PostgreSQL on 127.0.0.1:%d (pid %d, data in %s)", port, p.cmd.Process.Pid, data)
	return p, nil
}

// unprivileged is who PostgreSQL runs as: nil (this user) unless this is
// root; then the user postgres (or nobody), made owner of dir.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user postgres or nobody: %w", err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, fmt.Errorf("give %s to %s: %w", dir, u.Username, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ready waits until the server accepts connections.
func (p *postgres) ready(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return errors.New("exited at start")
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not listening after %s", limit)
}

// url is a connection string to database db.
func (p *postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// stop asks the server to shut down fast (SIGINT to its PID), and kills it
// if it has not after 10 s.
func (p *postgres) stop() error {
	pid := p.cmd.Process.Pid
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	harness.Logf("stopped PostgreSQL (pid %d)", pid)
	return nil
}
